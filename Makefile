# The two commands: `make demo` and `make test`. Each runs the set-up and an incremental build.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

# Instrumented builds, each in its own folder: `make check-sanitize` (ASan + UBSan, the whole
# suite), `make fuzz` (libFuzzer on every reader of untrusted bytes, FUZZ_SECONDS each,
# FUZZ_JOBS at once).
SANITIZE_BUILD ?= build-sanitize
FUZZ_BUILD ?= $(BUILD)/fuzz-clang
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 1

.PHONY: all setup build build-cli demo demo-unet test test-quick check-sanitize fuzz bench bench-memory format clean

all: build

setup:
	@bash scripts/setup

# A set-up, configure or build that fails removes the previous program, which would otherwise
# stay in place and run the older code (tandem --version names the commit it was built from).
# $(call build_steps,TARGET): the set-up, the configure, and the build of TARGET (empty: all).
define build_steps
@bash scripts/setup && \
  { [ -f $(BUILD)/CMakeCache.txt ] || \
    cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS); } && \
  cmake --build $(BUILD) -j $(JOBS) $(if $(1),--target $(1)) || \
  { rm -f $(BUILD)/tandem; \
    echo "make: the set-up or build failed; $(BUILD)/tandem is removed, so that no older" \
      "program runs in its place" >&2; exit 1; }
endef

# Everything: the program, the tests, the benchmarks, the fuzzers' corpora readers.
build:
	$(call build_steps,)

# The program alone and what it links, for the demos.
build-cli:
	$(call build_steps,tandem_cli)

demo: build-cli
	$(BUILD)/tandem train --model mlp --data mnist --devices 4 --schedule 1f1b \
	    --microbatches 8 --batch 64 --epochs 2 --optimizer adam --lr 1e-3 --seed 0

# A 3D U-Net on crops of a real T1 MRI (Debian's mricron-data), split over 2 devices; Dice
# plus binary cross-entropy (Dice alone settles on "all brain" inside the brain for a while).
demo-unet: build-cli
	$(BUILD)/tandem train --model unet3d --data mri --levels 2 --filters 8 --volume 32 \
	    --devices 2 --schedule 1f1b --microbatches 4 --batch 8 --epochs 1 --train-samples 1536 \
	    --test-samples 64 --dropout 0 --bce --optimizer adam --lr 3e-3 --seed 0

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The unit tests of every part and a few command-line checks (CTest label "quick"): a few
# minutes, for the inner loop; `make test` runs everything.
test-quick: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 -L quick

check-sanitize: setup
	bash scripts/check-sanitize $(SANITIZE_BUILD) $(JOBS)

fuzz: setup
	JOBS=$(JOBS) bash scripts/fuzz all $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS)

bench: build
	bash bench/run.sh $(BUILD)

# The largest volume under a per-device budget (byte counts: independent of the machine's load).
bench-memory: build
	bash bench/memory-report.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)
