# metalprove build and checks. GNU make. `make` builds bin/metalprove; `make test` runs every
# check CI runs (.ci/run calls it), in order.

# Go from PATH, else the default install location (CI's environment may lack Go on PATH).
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
GO := $(GO)
GOFMT ?= $(dir $(GO))gofmt
# Sub-commands (scripts, go generate) find the same toolchain as `go`.
export ORIG_PATH := $(PATH)
export PATH := $(abspath $(dir $(GO))):$(PATH)
export GO

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# Fuzz budget per target: a count of executions in `make test` (a duration can trip Go 1.26's
# fuzz deadline race, see scripts/fuzz-smoke.sh), a duration in `make fuzz`.
FUZZTIME ?= 50000x
FUZZTIME_LONG ?= 2m
# go test's timeout per package: a 2× margin over the slowest package's time on a loaded 2-core
# machine (internal/backend/device took 566 s there against 26 s idle; issue 25).
TEST_TIMEOUT ?= 20m

.NOTPARALLEL:
.PHONY: all build cuda install test check-generated fmt-check vet unit host-isa-check fuzz-smoke fuzz bench bench-go bench-gnark clean check-metal metallib check-msl

all: build

build: metallib
	@echo "building bin/metalprove: a first build compiles the host device's C++ kernels (cgo), about two minutes on 2 cores with nothing printed meanwhile; later builds take seconds"
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/metalprove ./cmd/metalprove

# make cuda: the same binary with the CUDA kernels precompiled by nvcc (CUDA toolkit needed;
# CUDA_ARCHS lists the cubins' architectures): no NVRTC compilation at run time.
CUDA_ARCHS ?= 80 86 89 90
cuda: metallib
	scripts/build-fatbin.sh $(CUDA_ARCHS)
	$(GO) build -tags cudafatbin -ldflags "-X main.version=$(VERSION)" -o bin/metalprove ./cmd/metalprove

# make install: bin/metalprove into $(PREFIX)/bin when PREFIX is given (make install
# PREFIX=/usr/local), else into `go env GOBIN` (default: $(go env GOPATH)/bin, ~/go/bin), the
# directory `go install` uses; says so when that directory is not on PATH.
PREFIX ?=
install: build
	@if [ -n "$(PREFIX)" ]; then dest="$(PREFIX)/bin"; else \
		dest="$$($(GO) env GOBIN)"; [ -n "$$dest" ] || dest="$$($(GO) env GOPATH)/bin"; fi; \
	mkdir -p "$$dest" && install -m 0755 bin/metalprove "$$dest/metalprove" && echo "installed $$dest/metalprove"; \
	case ":$$ORIG_PATH:" in *":$$dest:"*) ;; \
		*) echo "note: $$dest is not on your PATH; add it, e.g. export PATH=\"$$dest:\$$PATH\" in your shell profile";; esac

test: check-generated check-msl check-metal fmt-check vet unit host-isa-check fuzz-smoke

# macOS only (nothing elsewhere): internal/gpu/metal/shaders.gen.metal -> metallib/metalprove.metallib
# and its source stamp, embedded by the Metal backend. Without Xcode's Metal compiler it warns and
# builds none (the backend compiles its embedded source); METALPROVE_REQUIRE_METALLIB=1: an error.
metallib:
	@if [ "$$(uname -s)" = Darwin ]; then scripts/build-metallib.sh; fi

# The Metal bridge without a Mac: bridge.m against stub headers, darwin cgo type check, vet.
check-metal:
	scripts/check-metal.sh

# The kernels through clang: address-space check (two flavours), deliberate mistakes, CUDA syntax.
check-msl:
	scripts/check-msl.sh

# go generate must not change any file.
check-generated:
	scripts/check-generated.sh

fmt-check:
	@files=$$($(GOFMT) -l $$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*')); \
	if [ -n "$$files" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet ./...

# The modules the host device compiles at run time in the tests (generated constraint code, fixed
# flags whatever the host copy in use), cached by their sources and flags: one directory for `unit`
# and `host-isa-check`, so that the copies' reruns of the kernel tests do not compile them again
# (about 40 s each on 2 cores).
HOST_MODULE_CACHE ?= $(CURDIR)/.cache/host-modules

unit:
	METALPROVE_HOST_CACHE=$(HOST_MODULE_CACHE) $(GO) test -timeout $(TEST_TIMEOUT) ./...

# The host kernels' tests on the x86-64 code paths this CPU does not pick (baseline, AVX2).
host-isa-check:
	METALPROVE_HOST_CACHE=$(HOST_MODULE_CACHE) scripts/host-isa-check.sh

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-smoke.sh

fuzz:
	FUZZTIME=$(FUZZTIME_LONG) scripts/fuzz-smoke.sh

# The main job on the best device (--device auto: Metal, else CUDA, else the host device): prove
# 1024 Keccak-f permutations, warm-up 1 + 5 timed proofs, each verified, per-stage table. On the
# host device (a CPU emulating the GPU) the bench proves 16 permutations 3 times instead, so that
# it finishes in about two minutes on 2 cores, and says so. BENCH_FLAGS adds flags (--json, …).
BENCH_FLAGS ?=
bench: build
	bin/metalprove bench --example keccakf --device auto $(BENCH_FLAGS)

# The Go micro-benchmarks (testing.B) of every package.
bench-go:
	$(GO) test -run='^$$' -bench=. ./...

# Host device and pure Go against gnark-crypto's BabyBear NTT and Poseidon2, in one run (a separate
# module, so gnark-crypto is no dependency of metalprove).
bench-gnark:
	cd internal/kernels/gnarkbench && GNARKBENCH=1 $(GO) test -count=1 -run Summary -v -timeout 20m .

clean:
	rm -rf bin
