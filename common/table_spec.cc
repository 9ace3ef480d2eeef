#include "common/table_spec.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/model_spec.h"

namespace ps {

std::string TableSpecToString(const TableSpec& t) {
  return absl::StrCat(EscapeName(t.name), "[dim=", t.dim, ",seed=", t.seed,
                      ",init_scale=", t.init_scale, "]");
}

absl::Status ValidateTableSpecs(const std::vector<TableSpec>& tables, const TableLimits& limits) {
  if (tables.size() > static_cast<size_t>(limits.max_tables)) {
    return absl::InvalidArgumentError(absl::StrCat("the model declares ", tables.size(),
                                                   " embedding tables; at most ",
                                                   limits.max_tables, " allowed"));
  }
  absl::flat_hash_set<std::string> names;
  for (const TableSpec& t : tables) {
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding table \"", EscapeName(t.name), "\": ", why));
    };
    if (t.name.empty()) return bad("empty name");
    if (t.name.size() > static_cast<size_t>(limits.max_name_bytes)) {
      return bad(absl::StrCat("name of ", t.name.size(), " bytes; at most ",
                              limits.max_name_bytes));
    }
    if (!names.insert(t.name).second) return bad("declared twice");
    if (t.dim < 1 || t.dim > limits.max_dim) {
      return bad(absl::StrCat("dim ", t.dim, " not in [1, ", limits.max_dim, "]"));
    }
    if (!(t.init_scale >= 0) || t.init_scale > 3.0e38f) {  // as EmbeddingTableOptions
      return bad(absl::StrCat("init_scale ", t.init_scale, " is not in [0, 3e38]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CompareTableSpecs(const std::vector<TableSpec>& expected,
                               const std::vector<TableSpec>& got) {
  for (size_t i = 0; i < expected.size() && i < got.size(); ++i) {
    if (expected[i] != got[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("embedding table ", i, " is ", TableSpecToString(expected[i]),
                       " on the servers, ", TableSpecToString(got[i]), " here"));
    }
  }
  if (expected.size() != got.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the servers hold ", expected.size(), " embedding tables, this model declares ",
        got.size()));
  }
  return absl::OkStatus();
}

}  // namespace ps
