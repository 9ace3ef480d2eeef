#include "common/allocator.h"

#include <malloc.h>

namespace ps {

void TuneAllocatorForLargeBuffers() {
  mallopt(M_MMAP_MAX, 0);                    // large blocks come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);        // keep up to 1 GB of free heap
  mallopt(M_TOP_PAD, 64 << 20);              // grow the heap in 64 MB steps
}

}  // namespace ps
