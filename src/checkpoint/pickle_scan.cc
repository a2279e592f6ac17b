// Written by hand: no Debian library reads pickle opcodes from C++, and LibTorch's own
// unpickler is the reader this walk protects. The opcodes and their arguments are those of
// Python's pickletools (protocols 0 to 5).
#include "pickle_scan.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

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

// The pickle machine's stack, counted: items above the last mark, and the counts below each
// mark. LibTorch's unpickler pops without looking, so an opcode that needs more items than
// are there (or a mark that is not there) reads past its stack.
class StackCount {
 public:
  void push() { ++items_; }
  void pop(size_t n, size_t at) {
    TANDEM_CHECK(items_ >= n,
                 "the opcode at byte {} of its pickle takes {} item(s) from a stack of {}", at, n,
                 items_);
    items_ -= n;
  }
  void mark() {
    marks_.push_back(items_);
    items_ = 0;
  }
  void pop_mark(size_t at) {
    TANDEM_CHECK(!marks_.empty(), "the opcode at byte {} of its pickle needs a mark: none is set",
                 at);
    items_ = marks_.back();
    marks_.pop_back();
  }

 private:
  size_t items_ = 0;
  std::vector<size_t> marks_;
};

// What an opcode does to the stack (pickletools' stack_before and stack_after): whether it sets
// a mark, whether it takes the items down to the last mark first, how many items it then takes
// and how many it leaves.
struct Effect {
  bool mark;
  bool to_mark;
  size_t takes;
  size_t leaves;
};

Effect effect_of(unsigned char op) {
  switch (op) {
    case 0x80:
    case 0x95:  // PROTO, FRAME
      return {false, false, 0, 0};
    case '(':  // MARK
      return {true, false, 0, 0};
    case '0':  // POP
      return {false, false, 1, 0};
    case '1':  // POP_MARK
      return {false, true, 0, 0};
    case '2':  // DUP
      return {false, false, 1, 2};
    case 'q':
    case 'r':
    case 'p':
    case 0x94:  // BINPUT LONG_BINPUT PUT MEMOIZE
    case 'Q':
    case 0x85:
    case 0x98:  // BINPERSID TUPLE1 READONLY_BUFFER
      return {false, false, 1, 1};
    case 'a':
    case 'b':  // APPEND BUILD
    case 'R':
    case 0x81:
    case 0x93:
    case 0x86:  // REDUCE NEWOBJ STACK_GLOBAL TUPLE2
      return {false, false, 2, 1};
    case 's':
    case 0x87:
    case 0x92:  // SETITEM TUPLE3 NEWOBJ_EX
      return {false, false, 3, 1};
    case 'd':
    case 'l':
    case 't':
    case 0x91:
    case 'i':
    case 'o':                      // DICT LIST TUPLE FROZENSET
      return {false, true, 0, 1};  // INST OBJ
    case 'e':
    case 'u':
    case 0x90:  // APPENDS SETITEMS ADDITEMS: onto the item below the mark
      return {false, true, 1, 1};
    case '.':  // STOP
      return {false, false, 1, 0};
    default:  // every other opcode leaves one item and takes none
      return {false, false, 0, 1};
  }
}

}  // namespace

void check_pickle_lengths(const char* data, size_t size) {
  size_t pos = 0;
  StackCount stack;
  while (pos < size) {
    const auto op = static_cast<unsigned char>(data[pos]);
    const size_t at = pos++;
    Layout layout{};
    TANDEM_CHECK(layout_of(op, layout), "byte {} of its pickle (0x{:02x}) is no pickle opcode", at,
                 op);
    const Effect e = effect_of(op);
    if (e.mark) stack.mark();
    if (e.to_mark) stack.pop_mark(at);
    stack.pop(e.takes, at);
    for (size_t i = 0; i < e.leaves; ++i) stack.push();
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
