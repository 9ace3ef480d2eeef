#include "common/version.h"

namespace ps {

const char* Version() { return PS_VERSION; }

}  // namespace ps
