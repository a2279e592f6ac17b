// Consolidation to one state dict, reading it back, init_from, and the round trip with Python's
// torch.load / torch.save.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "checkpoint/optimizer_state.h"
#include "helpers.h"
#include "tandem/checkpoint/all.h"

namespace tandem::checkpoint {
namespace {

using namespace testing;

// A Python interpreter that imports torch: $TANDEM_PYTHON, python3, or Debian's /usr/bin/python3
// (an interpreter earlier on PATH may lack the python3-torch package). Empty when none does.
std::string python_with_torch() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TANDEM_PYTHON")) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    if (std::system((py + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  }
  return "";
}

// Runs `script` with `python`; returns its exit status and fills `output` with stdout+stderr.
int run_python(const std::string& python, const TempDir& dir, const std::string& script,
               std::string* output) {
  const std::string path = dir / "check.py";
  std::ofstream(path) << script;
  const std::string cmd = python + " " + path + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The bytes of a state dict holding `w` alone, saved as DIR/good.pt: the start of a crafted
// file (written with write_bytes).
std::string saved_bytes(const TempDir& dir, const torch::Tensor& w) {
  save_state_dict_file({{"w", w}}, dir / "good.pt");
  std::ifstream in(dir / "good.pt", std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::unique_ptr<runtime::Pipeline> trained(const Recipe& s, const TempDir& dir) {
  auto p = make_pipeline(s);
  train_until(*p, 2);
  save(*p, {2, 0, 16, 5}, dir.path());
  return p;
}

const std::vector<std::string> kNames = {
    "dense0.weight",        "dense0.bias",        "block0.dense0.weight", "block0.dense0.bias",
    "block0.dense1.weight", "block0.dense1.bias", "logits.weight",        "logits.bias"};

TEST(StateDict, ConsolidateHoldsEveryTensorUnderItsModelName) {
  TempDir dir;
  auto p = trained(Recipe{}, dir);
  EXPECT_EQ(consolidate(dir.path(), dir / "model.pt"), 8);
  const auto sd = load_state_dict_file(dir / "model.pt");
  expect_bitwise_equal(sd, snapshot(*p));
  std::vector<std::string> names;
  for (const auto& [n, t] : p->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, kNames);  // the naming the header documents
}

TEST(StateDict, InitFromAFileOrACheckpointOnAnyPartition) {
  TempDir dir;
  auto p = trained(Recipe{}, dir);
  consolidate(dir / "step-2", dir / "model.pt");
  Recipe three;
  three.balance = {2, 2, 2};
  three.init_seed = 99;
  auto q = make_pipeline(three);
  init_from(*q, dir / "model.pt");
  expect_bitwise_equal(snapshot(*q), snapshot(*p));
  EXPECT_EQ(q->step(), 0);  // tensors only

  auto r = make_pipeline(three);
  init_from(*r, dir.path());  // the save directory: its latest checkpoint
  expect_bitwise_equal(snapshot(*r), snapshot(*p));
  for (int s : r->local_stages()) EXPECT_TRUE(r->optimizer(s)->state().empty());
}

TEST(StateDict, InitFromNamesMissingUnexpectedAndMismatchedTensors) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  auto sd = snapshot(*p);
  auto fresh = [] {
    Recipe s;
    s.init_seed = 99;
    return make_pipeline(s);
  };

  auto missing = sd;
  missing.erase("logits.weight");
  save_state_dict_file(missing, dir / "missing.pt");
  auto q = fresh();
  const auto before = snapshot(*q);
  EXPECT_THROW_WITH(init_from(*q, dir / "missing.pt"), "missing logits.weight",
                    "<layer>.<parameter>");
  expect_bitwise_equal(snapshot(*q), before);

  auto extra = sd;
  extra["head.weight"] = torch::zeros({2});
  save_state_dict_file(extra, dir / "extra.pt");
  EXPECT_THROW_WITH(init_from(*q, dir / "extra.pt"), "unexpected head.weight");

  auto shape = sd;
  shape["dense0.bias"] = torch::zeros({17});
  save_state_dict_file(shape, dir / "shape.pt");
  EXPECT_THROW_WITH(init_from(*q, dir / "shape.pt"), "dense0.bias (file [17], model [16])");
  expect_bitwise_equal(snapshot(*q), before);

  auto doubles = sd;
  for (auto& [n, t] : doubles) t = t.to(torch::kFloat64);
  save_state_dict_file(doubles, dir / "double.pt");
  init_from(*q, dir / "double.pt");  // converted, as load_state_dict does
  expect_bitwise_equal(snapshot(*q), sd);
}

// A damaged or hostile zip archive is refused, naming what is wrong, before LibTorch's zip
// reader (which trusts the directory) sees it. Offsets: APPNOTE.TXT 4.3.12 (central directory
// header) and 4.3.16 (end of central directory record).
TEST(StateDict, DamagedZipArchivesAreRefusedBeforeLibTorchReadsThem) {
  TempDir dir;
  std::map<std::string, torch::Tensor> sd{{"w", torch::arange(1000, torch::kFloat32)}};
  save_state_dict_file(sd, dir / "good.pt");
  std::vector<char> good;
  {
    std::ifstream in(dir / "good.pt", std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto find = [&](const std::vector<char>& b, const char* sig, size_t from = 0) {
    for (size_t i = from; i + 4 <= b.size(); ++i)
      if (std::memcmp(b.data() + i, sig, 4) == 0) return i;
    return b.size();
  };
  const size_t central = find(good, "PK\x01\x02");
  const size_t end = find(good, "PK\x05\x06");
  ASSERT_LT(central, good.size());
  ASSERT_LT(end, good.size());
  auto write = [&](const std::string& name, const std::vector<char>& b) {
    std::ofstream(dir / name, std::ios::binary).write(b.data(), b.size());
    return dir / name;
  };
  auto put32 = [](std::vector<char>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); };
  auto put16 = [](std::vector<char>& b, size_t at, uint16_t v) { std::memcpy(&b[at], &v, 2); };

  std::vector<char> cut(good.begin(), good.begin() + good.size() / 2);
  EXPECT_THROW_WITH(load_state_dict_file(write("cut.pt", cut)), "cut.pt",
                    "cannot be read as a state dict", "not a zip archive");
  std::vector<char> huge = good;  // the first entry claims 2 GB, stored
  put32(huge, central + 20, 0x7ffffff0u);
  put32(huge, central + 24, 0x7ffffff0u);
  EXPECT_THROW_WITH(load_state_dict_file(write("huge.pt", huge)), "huge.pt",
                    "declares 2147483632 bytes (2147483632 stored) in an archive of");
  std::vector<char> moved = good;  // the first entry's local header lies past the end
  put32(moved, central + 42, static_cast<uint32_t>(good.size() + 100));
  EXPECT_THROW_WITH(load_state_dict_file(write("moved.pt", moved)), "moved.pt",
                    "local header of zip entry", "missing or disagrees");
  std::vector<char> bzip2 = good;
  put16(bzip2, central + 10, 12);
  EXPECT_THROW_WITH(load_state_dict_file(write("bzip2.pt", bzip2)), "bzip2.pt",
                    "uses compression method 12");
  // The end records announce one entry more than there are. PyTorch writes the zip64 end
  // record (APPNOTE 4.3.14, entry counts at +24 and +32) as well as the classic one.
  std::vector<char> count = good;
  put16(count, end + 8, static_cast<uint16_t>(good[end + 8] + 1));
  put16(count, end + 10, static_cast<uint16_t>(good[end + 10] + 1));
  const size_t end64 = find(good, "PK\x06\x06");
  if (end64 < good.size()) {
    put32(count, end64 + 24, static_cast<uint32_t>(good[end64 + 24] + 1));
    put32(count, end64 + 32, static_cast<uint32_t>(good[end64 + 32] + 1));
  }
  EXPECT_THROW_WITH(load_state_dict_file(write("count.pt", count)), "count.pt",
                    "cannot be read as a state dict");
  EXPECT_EQ(load_state_dict_file(dir / "good.pt").at("w").numel(), 1000);
}

TEST(StateDict, ReadingSomethingElseFailsClearly) {
  TempDir dir;
  std::ofstream(dir / "junk.pt") << "not a pickle";
  EXPECT_THROW_WITH(load_state_dict_file(dir / "junk.pt"), "junk.pt",
                    "cannot be read as a state dict");
  const std::vector<char> list = torch::pickle_save(c10::IValue(c10::List<int64_t>({1, 2})));
  std::ofstream(dir / "list.pt", std::ios::binary).write(list.data(), list.size());
  EXPECT_THROW_WITH(load_state_dict_file(dir / "list.pt"), "list.pt", "not a dict of tensors");
}

// LibTorch's reader builds each tensor as the view the file describes, even one that reaches
// past the storage the file holds for it: such a file is refused, naming the file and the
// tensor, before anything reads other memory through it.
TEST(StateDict, ATensorReachingPastItsStorageIsRefused) {
  TempDir dir;
  torch::Tensor w = torch::ones({4});                     // a 16-byte storage
  w.unsafeGetTensorImpl()->set_sizes_contiguous({1000});  // described as 1000 elements
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("dense0.weight", w);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream(dir / "crafted.pt", std::ios::binary).write(bytes.data(), bytes.size());
  try {
    load_state_dict_file(dir / "crafted.pt");
    FAIL() << "a tensor reaching past its storage was loaded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "'" + dir / "crafted.pt" +
                  "' holds 'dense0.weight' of shape [1000] (strides [1], offset 0), which reaches "
                  "past the 16 bytes of its storage; the file is damaged");
  }
}

// The pickle declares each storage's element count and the archive holds its bytes in a record
// of its own: LibTorch sized the storage by the count, whatever the record held, so a file
// declaring 60000 floats over a record of 1000 loaded, and reading the tensor read past the
// record. Each storage is now the record's bytes (detail::pickle_load_sized), so the tensor
// reaches past it and is refused.
TEST(StateDict, AStorageLargerThanItsRecordIsRefused) {
  TempDir dir;
  std::string bytes = saved_bytes(dir, torch::ones({1000}));
  // The pickle writes 1000 as BININT2 ('M', little endian): once as the storage's element
  // count, once as the tensor's size. Both become 60000; the record keeps its 4000 bytes.
  const std::string thousand("M\xe8\x03", 3), sixty_thousand("M\x60\xea", 3);
  int replaced = 0;
  for (size_t at = bytes.find(thousand); at != std::string::npos; at = bytes.find(thousand, at)) {
    bytes.replace(at, 3, sixty_thousand);
    ++replaced;
  }
  ASSERT_EQ(replaced, 2);
  write_bytes(dir / "crafted.pt", bytes);
  EXPECT_THROW_WITH(load_state_dict_file(dir / "crafted.pt"),
                    "crafted.pt' holds 'w' of shape [60000] (strides [1], offset 0), which "
                    "reaches past the 4000 bytes of its storage; the file is damaged");
  EXPECT_EQ(load_state_dict_file(dir / "good.pt").at("w").numel(), 1000);
}

// A string in the pickle that declares 2 GB: LibTorch's unpickler reserved the declared length
// before reading it (the fuzzers' out-of-memory inputs). The lengths are checked first.
TEST(StateDict, APickleDeclaringMoreBytesThanItHoldsIsRefused) {
  TempDir dir;
  std::string bytes = saved_bytes(dir, torch::ones({4}));
  // The key "w": BINUNICODE ('X'), a 4-byte length, the characters.
  const std::string key("X\x01\x00\x00\x00w", 6);
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 1, 4, std::string("\xff\xff\xff\x7f", 4));
  write_bytes(dir / "crafted.pt", bytes);
  EXPECT_THROW_WITH(load_state_dict_file(dir / "crafted.pt"), "crafted.pt",
                    "cannot be read as a state dict: the opcode at byte",
                    "of its pickle declares 2147483647 bytes, but only");
  // The same for a memo index: the key becomes NONE and a LONG_BINPUT of 2^32-1.
  std::string memo = bytes;
  memo.replace(at, 6, std::string("Nr\xff\xff\xff\xff", 6));
  write_bytes(dir / "memo.pt", memo);
  EXPECT_THROW_WITH(load_state_dict_file(dir / "memo.pt"), "memo.pt",
                    "of its pickle stores memo entry 4294967295, more than a pickle of");
}

// An opcode that takes more items than the stack holds: LibTorch's unpickler pops without
// looking and frees what is not there (a fuzz_state_dict input, "free(): invalid size").
TEST(StateDict, APickleThatEmptiesItsStackIsRefused) {
  TempDir dir;
  std::string bytes = saved_bytes(dir, torch::ones({4}));
  const size_t at = bytes.find(std::string("X\x01\x00\x00\x00w", 6));
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 6, std::string(")\x87\x87\x87\x87\x87", 6));  // EMPTY_TUPLE, TUPLE3 x5
  write_bytes(dir / "crafted.pt", bytes);
  EXPECT_THROW_WITH(load_state_dict_file(dir / "crafted.pt"), "crafted.pt",
                    "of its pickle takes 3 item(s) from a stack of 1");
}

// Python reads the consolidated file with torch.load and compares every name and value with
// the values C++ wrote as text (9 significant digits: exact for fp32); then writes a plain
// dict with torch.save that init_from must accept.
TEST(StateDict, PythonTorchLoadReadsItAndTorchSaveWritesOneWeRead) {
  const std::string python = python_with_torch();
  if (python.empty()) {
    GTEST_SKIP() << "no Python with torch (tried $TANDEM_PYTHON, python3, /usr/bin/python3): "
                    "install python3-torch to run this check";
  }
  TempDir dir;
  auto p = trained(Recipe{}, dir);
  consolidate(dir.path(), dir / "model.pt");
  {
    std::ofstream want(dir / "want.txt");
    for (const auto& [name, t] : p->named_parameters()) {
      const torch::Tensor c = t.detach().cpu().contiguous();
      want << name << "|" << fmt::format("{}", fmt::join(c.sizes(), ",")) << "|";
      const float* v = c.data_ptr<float>();
      for (int64_t i = 0; i < c.numel(); ++i) want << fmt::format("{:.9g} ", v[i]);
      want << "\n";
    }
  }
  const std::string script = fmt::format(R"PY(
import sys, torch
sd = torch.load("{dir}/model.pt")
assert isinstance(sd, dict), type(sd)
want = []
for line in open("{dir}/want.txt"):
    name, shape, values = line.rstrip("\n").split("|")
    want.append(name)
    t = sd[name]
    shape = [int(s) for s in shape.split(",")]
    exp = torch.tensor([float(v) for v in values.split()], dtype=torch.float32).reshape(shape)
    assert t.dtype == torch.float32 and list(t.shape) == shape, (name, t.dtype, t.shape)
    assert torch.equal(t, exp), name
assert list(sd.keys()) == want, (list(sd.keys()), want)
# A file as a PyTorch user would write it: plain dict, model names, new values.
out = {{k: torch.full_like(v, 0.25) for k, v in sd.items()}}
out["dense0.bias"] = torch.arange(16, dtype=torch.float32) / 4
torch.save(out, "{dir}/from_python.pt")
# What model.state_dict() returns: an OrderedDict with _metadata.
import collections
ordered = collections.OrderedDict(out)
ordered._metadata = collections.OrderedDict()
torch.save(ordered, "{dir}/ordered.pt")
print("checked", len(want))
)PY",
                                         fmt::arg("dir", dir.path()));
  std::string output;
  ASSERT_EQ(run_python(python, dir, script, &output), 0) << output;
  EXPECT_NE(output.find("checked 8"), std::string::npos) << output;

  auto q = make_pipeline(Recipe{});
  init_from(*q, dir / "from_python.pt");
  const auto got = snapshot(*q);
  EXPECT_TRUE(torch::equal(got.at("dense0.bias"), torch::arange(16, torch::kFloat32) / 4));
  EXPECT_TRUE(torch::equal(got.at("logits.weight"), torch::full({5, 16}, 0.25)));

  // LibTorch 1.13 cannot rebuild an OrderedDict (2.x reads it as a dict): either it reads the
  // same tensors or the error says what to write instead.
  try {
    const auto ordered = load_state_dict_file(dir / "ordered.pt");
    EXPECT_TRUE(torch::equal(ordered.at("dense0.bias"), got.at("dense0.bias")));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a plain dict of tensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::checkpoint
