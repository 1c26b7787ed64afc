# Front door. `make test` works on a clean clone of a Debian 12 machine: `deps` installs
# the toolchain and libraries first (cmake included), every other target builds on it.

JOBS := $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test asan bench clean

all: build

deps:
	bash scripts/install-deps.sh

build: deps
	@test -f build/default/build.ninja || cmake --preset default
	cmake --build --preset default -j$(JOBS)

run: build
	./build/default/quickstart

test: build
	ctest --preset default --output-on-failure -j$(JOBS)

asan: deps
	@test -f build/asan/build.ninja || cmake --preset asan
	cmake --build --preset asan -j$(JOBS)
	ctest --preset asan --output-on-failure -j$(JOBS)

bench: build
	@set -e; found=0; \
	for b in build/default/bench_*; do \
	  if [ -f "$$b" ] && [ -x "$$b" ]; then \
	    found=1; echo "== $$b"; "./$$b"; \
	  fi; \
	done; \
	if [ "$$found" -eq 0 ]; then echo "no bench_* executables in build/default"; fi

clean:
	rm -rf build var
