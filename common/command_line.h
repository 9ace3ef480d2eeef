// ParseCommandLine: how every binary of this project reads its flags.
// absl::ParseCommandLine (so --flagfile=FILE, --fromenv and --undefok work as
// Abseil documents), after setting the usage message and making --help and
// --helpshort list every flag defined in this project's sources, wherever it
// is defined (the flags libraries of common/, client/, server/, worker/),
// and not only those of the binary's *_main.cc. It also switches off Abseil's
// debug-only mutex deadlock detection (common/mutex_checks.h). Call once,
// first in main().
#ifndef PS_COMMON_COMMAND_LINE_H_
#define PS_COMMON_COMMAND_LINE_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace ps {

// The positional arguments (argv[0] first), as absl::ParseCommandLine
// returns them; exits as it does on --help or a bad flag.
std::vector<char*> ParseCommandLine(int argc, char** argv, absl::string_view usage);

}  // namespace ps

#endif  // PS_COMMON_COMMAND_LINE_H_
