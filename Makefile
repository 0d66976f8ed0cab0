# make demo  - the main job on the embedded default, no setup
# make test  - every test, on a fresh machine: installs what it needs first
#              (the example plugin's module, examples/rueidis, included; and
#              bench/redsync's go.mod kept tidy, so bench/run.sh builds)
GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test deps vet fmt-check portability

demo:
	$(GO) run ./cmd/redlock demo

# deps installs what the tests need from Debian's packages when missing:
# redis-server, and a C compiler (the race detector needs cgo).
deps:
	@pkgs=; command -v redis-server >/dev/null 2>&1 || pkgs="$$pkgs redis-server"; \
	command -v $${CC:-gcc} >/dev/null 2>&1 || pkgs="$$pkgs gcc libc6-dev"; \
	if [ -n "$$pkgs" ]; then \
		echo "not found: installing Debian's$$pkgs"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$pkgs >/dev/null; \
	fi
	@redis-server --version

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The race-detector tests run as two streams of one test binary each (-p 1), as many at once as
# go test's default -p 2 ran here: cmd/redlock, whose tortures run one after another for about
# eight minutes, and beside it every other package, then the engine's tests again with four Ps (the
# default is then two coordinator shards, one on two Ps as here, so the paths between shards run
# under every test too). Run after the first pass, as before, that second pass added its two
# minutes to the wall time; beside cmd/redlock it fits in the time the other packages left idle.
# cmd/redlock's output is held and printed at the end, so the two streams do not interleave.
TEST_RACE := $(GO) test -race -count=1 -p 1 -timeout 10m
test: deps fmt-check vet portability
	@set -e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	echo "$(TEST_RACE) ./cmd/redlock (in the background; its output follows the others')"; \
	$(TEST_RACE) ./cmd/redlock >$$out 2>&1 & bg=$$!; \
	rc=0; pkgs=$$($(GO) list ./... | grep -v '/cmd/redlock$$'); \
	echo "$(TEST_RACE) <every other package>"; $(TEST_RACE) $$pkgs || rc=1; \
	echo "$(TEST_RACE) -cpu 4 ./engine"; $(TEST_RACE) -cpu 4 ./engine || rc=1; \
	wait $$bg || rc=1; cat $$out; exit $$rc
	# admission control on real masters under CPU hogs: the race detector
	# slows the engine past the master timeout, so this one runs without it
	$(GO) test -count=1 -timeout 5m -run '^TestOverloadOnRealMasters$$' ./bench
	# allocation counts: the race detector's sync.Pool drops what it is given
	$(GO) test -count=1 -timeout 5m -run 'Alloc' ./engine ./transport/memory
	cd examples/rueidis && GOWORK=off $(GO) mod tidy -diff && GOWORK=off $(GO) vet ./... && \
		GOWORK=off $(GO) test -race -count=1 -timeout 5m ./...
	cd bench/redsync && GOWORK=off $(GO) mod tidy -diff

# make portability - the library builds for PLATFORMS (GOOS/GOARCH), every package (the command,
# bench and its tools) for WHOLE, and the tests of OSPKGS for darwin. make test checks the platforms that differ most from
# this one (no Unix; plan9's and wasip1's syscall packages; 32 bits), since
# every platform costs a cold compile of the standard library (~30s);
# PLATFORMS=all checks every platform `go tool dist list` names.
LIBRARY := ./api ./engine ./actors ./transport/...
PLATFORMS ?= windows/amd64 plan9/amd64 wasip1/wasm linux/386
# WHOLE: `go build ./...` must not fail for a developer on Windows or on a 32-bit
# Linux (a Raspberry Pi), whose syscall structs differ (Rusage's counters are int32 there).
WHOLE := windows/amd64 linux/386
# OSPKGS have files built for one OS only (_linux, _other, build tags): their tests must compile on a
# developer's Mac too, where redis-server runs as well, so make test type-checks them for darwin.
OSPKGS := ./transport/redis ./internal/... ./bench ./cmd/redlock
portability:
	@set -e; for p in $(if $(filter all,$(PLATFORMS)),$$($(GO) tool dist list),$(PLATFORMS)); do \
		echo "go build library for $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build $(LIBRARY); \
	done
	@set -e; for p in $(WHOLE); do \
		echo "go build ./... for $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build ./...; \
	done
	@echo "go vet (tests included) for darwin/arm64 of the packages with files for one OS"
	@GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(OSPKGS)

# make test-load - the race-detector tests beside CPU hogs, at one, two and four Ps: the way to
# find a test that fails only on a busy machine or at GOMAXPROCS 1, as four did in CI or by hand.
# Not part of `make test`: with the defaults it runs the suite three times beside two hogs
# (not timed end to end here; cmd/redlock alone takes about 8 minutes a run).
# HOGS busy loops, COUNT runs per -cpu setting, PKGS the packages.
HOGS ?= 2
COUNT ?= 1
PKGS ?= ./...

.PHONY: test-load
test-load: deps
	@set -e; pids=; trap 'kill $$pids 2>/dev/null' EXIT; \
	for i in $$(seq $(HOGS)); do (while :; do :; done) & pids="$$pids $$!"; done; \
	echo "$(HOGS) CPU hogs:$$pids"; \
	$(GO) test -race -count=$(COUNT) -cpu 1,2,4 -timeout 60m $(PKGS)

# make torture - ten minutes of every fault kind (the default --faults list) and every workload
# (mutex, semaphore, read-write) on five real redis-server masters, with the history checker
# (SAFETY.md). TORTURE_FLAGS overrides.
TORTURE_FLAGS ?= --duration 10m --seed 1 --workloads mutex,semaphore,rw
TORTURE_BIN ?= $(or $(TMPDIR),/tmp)/redlock-torture

.PHONY: torture
torture: deps
	$(GO) build -o $(TORTURE_BIN) ./cmd/redlock
	$(TORTURE_BIN) torture $(TORTURE_FLAGS)
