// A walk over the opcodes of a pickle (protocols 0 to 5) that checks every length it declares
// against the bytes that follow, before LibTorch's unpickler reads it. Internal to the
// checkpoint part.
#pragma once

#include <cstddef>

namespace tandem::checkpoint::detail {

// Throws tandem::Error, naming the byte, when an opcode is not a pickle opcode, when the
// bytes end inside an opcode's argument, or when a string, bytes or long declares more bytes
// than are left: LibTorch's unpickler reserves a declared length before it reads, so 4 bytes of
// a damaged file could ask it for 4 GB. A memo index past what the pickle could hold is
// refused too (LibTorch grows its memo table to it). Stops at the first STOP.
void check_pickle_lengths(const char* data, size_t size);

}  // namespace tandem::checkpoint::detail
