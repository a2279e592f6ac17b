// Written by hand: no Debian library reads pickle opcodes from C++, and LibTorch's own
// unpickler is the reader this walk protects. The opcodes and their arguments are those of
// Python's pickletools (protocols 0 to 5).
#include "pickle_scan.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "tandem/common/check.h"

namespace tandem::checkpoint::detail {

namespace {

// How an opcode's argument is laid out.
enum class Arg {
  kNone,
  kFixed,   // `bytes` bytes
  kLength,  // a little-endian length of `bytes` bytes, then that many bytes
  kLines,   // `bytes` newline-terminated lines
};

struct Layout {
  Arg arg;
  size_t bytes;
};

// The opcodes of each layout (pickletools' names in the comments).
struct Opcodes {
  std::string_view ops;
  Layout layout;
};
const Opcodes kOpcodes[] = {
    // MARK STOP POP POP_MARK DUP NONE REDUCE APPEND BUILD DICT EMPTY_DICT APPENDS LIST
    // EMPTY_LIST OBJ SETITEM TUPLE EMPTY_TUPLE SETITEMS BINPERSID NEWOBJ TUPLE1 TUPLE2 TUPLE3
    // NEWTRUE NEWFALSE EMPTY_SET ADDITEMS FROZENSET NEWOBJ_EX STACK_GLOBAL MEMOIZE NEXT_BUFFER
    // READONLY_BUFFER
    {"(.012NRabd}el]ost)uQ\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98",
     {Arg::kNone, 0}},
    {"Khq\x80\x82", {Arg::kFixed, 1}},    // BININT1 BINGET BINPUT PROTO EXT1
    {"M\x83", {Arg::kFixed, 2}},          // BININT2 EXT2
    {"Jjr\x84", {Arg::kFixed, 4}},        // BININT LONG_BINGET LONG_BINPUT EXT4
    {"G\x95", {Arg::kFixed, 8}},          // BINFLOAT FRAME
    {"UC\x8c\x8a", {Arg::kLength, 1}},    // SHORT_BINSTRING, _BINBYTES, _BINUNICODE LONG1
    {"TBX\x8b", {Arg::kLength, 4}},       // BINSTRING BINBYTES BINUNICODE LONG4
    {"\x8d\x8e\x96", {Arg::kLength, 8}},  // BINUNICODE8 BINBYTES8 BYTEARRAY8
    {"ILSVFgpP", {Arg::kLines, 1}},       // INT LONG STRING UNICODE FLOAT GET PUT PERSID
    {"ci", {Arg::kLines, 2}},             // GLOBAL INST: module and name
};

// The layout of `op`; false for a byte that is no pickle opcode.
bool layout_of(unsigned char op, Layout& out) {
  for (const Opcodes& o : kOpcodes)
    if (o.ops.find(static_cast<char>(op)) != std::string_view::npos) {
      out = o.layout;
      return true;
    }
  return false;
}

}  // namespace

void check_pickle_lengths(const char* data, size_t size) {
  size_t pos = 0;
  while (pos < size) {
    const auto op = static_cast<unsigned char>(data[pos]);
    const size_t at = pos++;
    Layout layout{};
    TANDEM_CHECK(layout_of(op, layout), "byte {} of its pickle (0x{:02x}) is no pickle opcode", at,
                 op);
    if (op == '.') return;  // STOP
    const size_t left = size - pos;
    switch (layout.arg) {
      case Arg::kNone:
        break;
      case Arg::kFixed:
        TANDEM_CHECK(layout.bytes <= left, "its pickle ends inside the opcode at byte {}", at);
        if (op == 'r') {  // LONG_BINPUT: LibTorch grows its memo table to the index
          uint32_t index = 0;
          std::memcpy(&index, data + pos, 4);
          TANDEM_CHECK(index < size,
                       "the opcode at byte {} of its pickle stores memo entry {}, more than a "
                       "pickle of {} bytes can hold",
                       at, index, size);
        }
        pos += layout.bytes;
        break;
      case Arg::kLength: {
        TANDEM_CHECK(layout.bytes <= left, "its pickle ends inside the opcode at byte {}", at);
        uint64_t length = 0;
        std::memcpy(&length, data + pos, layout.bytes);  // little endian, as on x86-64
        pos += layout.bytes;
        TANDEM_CHECK(length <= size - pos,
                     "the opcode at byte {} of its pickle declares {} bytes, but only {} follow",
                     at, length, size - pos);
        pos += length;
        break;
      }
      case Arg::kLines:
        for (size_t line = 0; line < layout.bytes; ++line) {
          const void* end = std::memchr(data + pos, '\n', size - pos);
          TANDEM_CHECK(end != nullptr, "its pickle ends inside the opcode at byte {}", at);
          pos = static_cast<const char*>(end) - data + 1;
        }
        break;
    }
  }
  TANDEM_CHECK(false, "its pickle of {} bytes has no STOP opcode", size);
}

}  // namespace tandem::checkpoint::detail
