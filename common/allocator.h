// Allocator tuning for processes that move multi-megabyte tensors.
//
// By default glibc serves every allocation over 128 KB with a fresh mmap and
// returns it with munmap, so each message buffer is page-faulted in again
// (measured here: 64 MB gRPC messages at ~0.3 GB/s). Keeping large blocks on
// the heap and never trimming it lets freed buffers be reused warm.
//
// Call once at the start of main(), before other threads exist.
#ifndef PS_COMMON_ALLOCATOR_H_
#define PS_COMMON_ALLOCATOR_H_

namespace ps {

void TuneAllocatorForLargeBuffers();

}  // namespace ps

#endif  // PS_COMMON_ALLOCATOR_H_
