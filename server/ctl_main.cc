// ps_ctl: operator tool for running parameter servers.
//
//   ps_ctl status --servers=h:p,h:p   one JSON object per shard, per line
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "worker/ps_client.h"

ABSL_FLAG(std::string, servers, "", "Comma-separated HOST:PORT of the shards to query.");
ABSL_FLAG(double, timeout, 10, "Seconds to wait for each server.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Operator tool for parameter servers.\n"
      "  ps_ctl status --servers=HOST:PORT,...   print each shard's status as JSON, one "
      "object per line");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "status") {
    std::cerr << "usage: ps_ctl status --servers=HOST:PORT,... (see --help)" << std::endl;
    return 2;
  }
  std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  if (servers.empty()) {
    std::cerr << "ps_ctl: --servers is empty" << std::endl;
    return 2;
  }
  auto statuses = ps::QueryStatus(servers, absl::Seconds(absl::GetFlag(FLAGS_timeout)));
  if (!statuses.ok()) {
    std::cerr << "ps_ctl: " << statuses.status() << std::endl;
    return 1;
  }
  google::protobuf::util::JsonPrintOptions json;
  json.always_print_primitive_fields = true;
  json.preserve_proto_field_names = true;
  for (size_t i = 0; i < statuses->size(); ++i) {
    std::string line;
    google::protobuf::util::MessageToJsonString((*statuses)[i], &line, json);
    // Name the server the object came from as the first field.
    std::cout << "{\"server\":\"" << servers[i] << "\"," << line.substr(1) << std::endl;
  }
  return 0;
}
