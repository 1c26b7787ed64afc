# Front door. `make test` works on a clean clone of a Debian 12 machine: `deps` installs
# the toolchain and libraries first (cmake included), every other target builds on it.

JOBS := $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test repeat asan tsan bench fuzz format lint docs clean

all: build

deps:
	bash scripts/install-deps.sh

build: deps
	@test -f build/default/build.ninja || cmake --preset default
	cmake --build --preset default -j$(JOBS)

run: build
	./build/default/quickstart

test: build
	ctest --preset default --output-on-failure -j$(JOBS) || { bash scripts/ctest-failures.sh build/default; exit 1; }

# The concurrency tests, each repeated until it fails (at most 20 times): run after
# changing anything they cover.
REPEAT_TESTS := Race|Watch|Actor|Within|Lifecycle|Deadline|ClockStep|ForeignCommit|ProcessClaim|TestingKit|ReconcileApi|ReconcileTest.NoIdIsEverReconciledConcurrently
repeat: build
	ctest --preset default --output-on-failure -j$(JOBS) -R '$(REPEAT_TESTS)' --repeat until-fail:20

asan: deps
	@test -f build/asan/build.ninja || cmake --preset asan
	cmake --build --preset asan -j$(JOBS)
	ctest --preset asan --output-on-failure -j$(JOBS) || { bash scripts/ctest-failures.sh build/asan; exit 1; }

# Every suite, each ratio against its baseline from the same run (bench/README.md).
bench: build
	bash scripts/install-deps.sh python3
	python3 bench/ratios.py --suite all

# Thread sanitizer over the concurrency tests (CAF itself is not instrumented; see the preset).
# The WatchTest suite is left out: it times conflation against writers, which TSan slows
# ~20x (other suites' watch tests run). So is the crash test (its name has "Within"): it
# checks what a SIGKILLed process left on disk, not threads, and takes 15 times as long
# under TSan (make test and make asan run it).
# The pg.* twins of these suites run too, on the throwaway PostgreSQL server (a fixture).
TSAN_TESTS := Race|Within|Actor|Lifecycle|Reconcile|Misbehave|Stream|Fault|Deadline|ForeignCommit|TestingKit|ChangeLog|OptimisticConcurrency|Selectors|Paging|Labels|PostgresStore|PostgresServer|Leadership|HaTest
TSAN_SKIP := ^(pg\.)?(WatchTest|Crash)\.
tsan: deps
	@test -f build/tsan/build.ninja || cmake --preset tsan
	cmake --build --preset tsan -j$(JOBS) --target beehive_tests ha_node
	ctest --preset tsan --output-on-failure -j$(JOBS) -R '$(TSAN_TESTS)' -E '$(TSAN_SKIP)' \
	  || { bash scripts/ctest-failures.sh build/tsan; exit 1; }

# libFuzzer over every fuzz target for FUZZ_SECONDS each, starting from the seed corpus.
# What it learns stays in build/fuzz/corpus; a failing input lands in build/fuzz/ (copy it
# into fuzz/corpus/<target>/ with the fix, so every build replays it).
FUZZ_SECONDS ?= 60
fuzz: deps
	bash scripts/install-deps.sh clang-14 libclang-rt-14-dev
	@test -f build/fuzz/build.ninja || cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS)
	@set -e; for t in fuzz/*_fuzz.cpp; do \
	  n=$$(basename $$t _fuzz.cpp); echo "== fuzz_$$n"; mkdir -p build/fuzz/corpus/$$n; \
	  ./build/fuzz/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build/fuzz/$$n- build/fuzz/corpus/$$n fuzz/corpus/$$n \
	    > build/fuzz/$$n.log 2>&1 || { tail -40 build/fuzz/$$n.log; exit 1; }; \
	  grep '^stat::number_of_executed_units' build/fuzz/$$n.log; \
	done

format:
	bash scripts/install-deps.sh clang-format-14
	git ls-files '*.cpp' '*.hpp' | xargs clang-format-14 -i

lint: deps
	bash scripts/install-deps.sh clang-tidy-14
	@test -f build/lint/compile_commands.json || cmake --preset lint
	run-clang-tidy-14 -p build/lint -quiet -j$(JOBS) '$(CURDIR)/(src|tools)/'

docs:
	bash scripts/install-deps.sh doxygen
	mkdir -p build/docs
	doxygen docs/Doxyfile
	@echo "API docs: build/docs/html/index.html"

clean:
	rm -rf build var
