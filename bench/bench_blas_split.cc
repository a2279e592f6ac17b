// Does the BLAS keep a product's bits when the product is computed another way? For the
// OpenBLAS kernels this process runs (set OPENBLAS_CORETYPE to choose them), the three products
// of a linear layer (forward x W^T + b, input gradient g W, weight gradient g^T x) over a grid
// of shapes, remainders included, each compared bit for bit with the same product computed by
// one BLAS thread in one call:
//   - with 2 BLAS threads (what lending idle cores does to a product);
//   - split by output rows into chunks of C rows, each chunk its own single-threaded product
//     (a split that could lend cores without changing any element's summation order, if the
//     BLAS summed every element alike whatever the product's shape);
//   - split by output columns likewise.
// A row counts as "differs" when any element of the product differs in any bit.
// Not a timing: it decides whether lending can keep results bitwise (bench/RESULTS.md).
//
// Usage: bench_blas_split
#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

namespace {

void set_blas_threads(int n) {
  auto fn = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn) fn(n);
}

std::string blas_core() {
  auto fn = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn ? fn() : "unknown (not OpenBLAS)";
}

enum Form { kForward, kInputGrad, kWeightGrad };
const char* form_name[] = {"forward x W^T + b", "input gradient g W", "weight gradient g^T x"};

// Operands for rows M (batch), inputs K, outputs N. The product's shape: [M, N] forward, [M, K]
// input gradient, [N, K] weight gradient.
struct Operands {
  torch::Tensor a, w, b;
};

torch::Tensor product(Form f, const Operands& o) {
  switch (f) {
    case kForward:
      return torch::addmm(o.b, o.a, o.w.t());
    case kInputGrad:
      return o.a.mm(o.w);
    case kWeightGrad:
      return o.a.t().mm(o.w);
  }
  return {};
}

// The product's rows [r, r + n) (dim 0) or columns (dim 1) alone, as one product.
torch::Tensor part(Form f, const Operands& o, int dim, int64_t r, int64_t n) {
  Operands p = o;
  if (dim == 0) {
    if (f == kWeightGrad) p.a = o.a.narrow(1, r, n);  // rows of g^T: columns of g
    else p.a = o.a.narrow(0, r, n);
  } else {
    if (f == kForward) {
      p.w = o.w.narrow(0, r, n);
      p.b = o.b.narrow(0, r, n);
    } else {
      p.w = o.w.narrow(1, r, n);
    }
  }
  return product(f, p);
}

struct Count {
  int compared = 0, differ = 0;
  void add(bool same) {
    ++compared;
    differ += !same;
  }
  std::string str() const { return fmt::format("{}/{}", differ, compared); }
};

}  // namespace

int main() {
  at::set_num_threads(1);
  const int64_t ms[] = {1, 3, 8, 17, 64, 100, 128, 255, 256, 512, 1000};
  const int64_t ks[] = {10, 64, 129, 384, 512, 784, 1024};
  const int64_t ns[] = {5, 64, 130, 512, 1024};
  const int64_t chunks[] = {16, 64, 256};
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  std::printf("# bench_blas_split: OpenBLAS core %s (OPENBLAS_CORETYPE=%s)\n\n", blas_core().c_str(),
              env ? env : "unset");
  std::printf("| product | 2 threads vs 1 | rows in chunks of 16 | of 64 | of 256 | columns in chunks of 16 | of 64 | of 256 |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (Form f : {kForward, kInputGrad, kWeightGrad}) {
    Count threads, split[2][3];
    for (int64_t m : ms) {
      for (int64_t k : ks) {
        for (int64_t n : ns) {
          auto gen = torch::make_generator<at::CPUGeneratorImpl>(m * 7919 + k * 31 + n);
          Operands o;
          o.b = torch::randn({n}, gen);
          if (f == kForward) {
            o.a = torch::randn({m, k}, gen);
            o.w = torch::randn({n, k}, gen);
          } else if (f == kInputGrad) {
            o.a = torch::randn({m, n}, gen);
            o.w = torch::randn({n, k}, gen);
          } else {
            o.a = torch::randn({m, n}, gen);
            o.w = torch::randn({m, k}, gen);
          }
          set_blas_threads(1);
          const torch::Tensor whole = product(f, o);
          set_blas_threads(2);
          threads.add(torch::equal(product(f, o), whole));
          set_blas_threads(1);
          for (int dim = 0; dim < 2; ++dim) {
            const int64_t extent = whole.size(dim);
            for (int c = 0; c < 3; ++c) {
              if (chunks[c] >= extent) continue;  // one chunk: no split
              torch::Tensor joined = torch::empty_like(whole);
              for (int64_t r = 0; r < extent; r += chunks[c]) {
                const int64_t len = std::min(chunks[c], extent - r);
                joined.narrow(dim, r, len).copy_(part(f, o, dim, r, len));
              }
              split[dim][c].add(torch::equal(joined, whole));
            }
          }
        }
      }
    }
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", form_name[f], threads.str().c_str(),
                split[0][0].str().c_str(), split[0][1].str().c_str(), split[0][2].str().c_str(),
                split[1][0].str().c_str(), split[1][1].str().c_str(), split[1][2].str().c_str());
  }
  std::printf("\nEach cell: shapes whose product differs in any bit / shapes compared (M in {1..1000}, "
              "K in {10..1024}, N in {5..1024}, remainders included).\n");
  return 0;
}
