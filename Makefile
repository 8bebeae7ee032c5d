# The two commands the README starts with:
#   make demo   build the breakwater command and run its demo (examples/cli_demo.sh): several processes
#               share one circuit in a SQLite file; `make demo-lib` runs the library's (examples/lifecycle.c)
#   make check  install what is missing, check formatting, the layering and the files' sizes, build with -Werror,
#               run the whole ctest suite, then again under ASan+UBSan and TSan,
#               and once more built without the optional components (no SQLite, hiredis, libpq, libmicrohttpd, libcurl),
#               then check the ABI against the last release's (abi/) and build, install, consume and lint the
#               Debian packages
# For the edit-compile-test loop:
#   make test   the plain build and the quick tier (ctest -L quick: unit and contract suites, fuzz corpora, C++);
#               `make test-all` runs the plain build's whole suite. One case of any test executable by name:
#               BW_TEST=test_open_for ctest --test-dir build-check -R '^test_breaker$' (tests/support/harness.h)
# Variables:
#   JOBS=N             parallel build jobs (default: the number of CPUs)
#   PACKAGE_DIR=DIR    where `make package` keeps the packages it built (default build-package/; `make clean`
#                      removes it); BW_PACKAGE_KEEP=1 also keeps its temporary directory (build log, extracted root)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PACKAGE_DIR ?= build-package
CTEST = ctest --output-on-failure -j$(JOBS)

.PHONY: demo demo-lib check build test test-all asan tsan nosqlite abi package layers sizes bench bench-ir format format-check deps clean

demo: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$(JOBS) --target breakwater_cli >/dev/null
	sh examples/cli_demo.sh ./build/breakwater

demo-lib: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$(JOBS) --target lifecycle >/dev/null
	./build/lifecycle

deps:
	@sh scripts/deps.sh

check: deps-all format-check layers sizes abi test-all asan tsan nosqlite package
	@echo "check: all suites passed (plain, asan+ubsan, tsan, without the optional components), the ABI kept, the packages built and consumed"

deps-all:
	@sh scripts/deps.sh --all

build:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBW_WERROR=ON
	cmake --build build-check -j$(JOBS)

# The quick tier for the edit-compile-test loop: the plain build, then the unit and contract suites (ctest -L quick).
test: build
	cd build-check && $(CTEST) -L quick

# The plain build's whole suite (a leg of `make check`).
test-all: build
	cd build-check && $(CTEST)

asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBW_WERROR=ON -DBW_SANITIZE=address,undefined -DBW_BUILD_BENCH=OFF
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(CTEST)

# die_after_fork=0: the multi-process tests fork a parent whose coarse-clock ticker runs, and the
# children start their own (glibc supports it; TSan refuses it by default).
tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBW_WERROR=ON -DBW_SANITIZE=thread -DBW_BUILD_BENCH=OFF
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" $(CTEST)

# The core with no optional component: SQLite, hiredis, libpq, libmicrohttpd and libcurl absent (the shipped
# libraries are the core alone; the tests' library answers BW_ENOTSUP from bw_metrics_serve and bw_curl_new), every
# test that needs them left out by ctest.
nosqlite:
	cmake -S . -B build-nosqlite -DCMAKE_BUILD_TYPE=Debug -DBW_WERROR=ON -DBW_WITH_SQLITE=OFF -DBW_WITH_MHD=OFF -DBW_WITH_REDIS=OFF -DBW_WITH_POSTGRES=OFF -DBW_WITH_CURL=OFF -DBW_BUILD_BENCH=OFF
	cmake --build build-nosqlite -j$(JOBS)
	cd build-nosqlite && $(CTEST)

# The public libraries' ABI against the last release's dumps (abi/): an incompatible change without a new SONAME
# fails (docs/packaging.md).
# The libraries are built for it without link-time optimisation (which detaches their DWARF from their symbols).
abi:
	cmake -S . -B build-abi -DCMAKE_BUILD_TYPE=Debug -DBW_WERROR=ON -DBW_BUILD_TESTS=OFF -DBW_BUILD_BENCH=OFF -DBW_BUILD_EXAMPLES=OFF -DBW_BUILD_CLI=OFF -DBW_BUILD_STATIC=OFF
	cmake --build build-abi -j$(JOBS)
	sh scripts/abi_check.sh build-abi

# The Debian packages (debian/): built with dpkg-buildpackage and kept in $(PACKAGE_DIR)/ (the previous run's
# replaced), installed into a temporary root, a consumer built against them with pkg-config and CMake, lintian
# (errors fail).
package:
	@sh scripts/deps.sh --package
	sh scripts/package_check.sh $(PACKAGE_DIR)

bench: deps
	cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DBW_BUILD_TESTS=OFF >/dev/null
	cmake --build build-bench -j$(JOBS) --target breaker_bench registry_bench pipeline_bench store_bench metrics_bench cli_bench breakwater_cli $$(cmake --build build-bench --target help | grep -qw http_bench && echo http_bench) >/dev/null
	./build-bench/breaker_bench
	./build-bench/registry_bench
	./build-bench/pipeline_bench
	./build-bench/store_bench
	./build-bench/metrics_bench
	./build-bench/cli_bench ./build-bench/breakwater
	if [ -x build-bench/http_bench ]; then ./build-bench/http_bench; fi

# The layers of src/ only point down (docs/architecture.md).
layers:
	sh scripts/check_layers.sh

# No source file (src/, include/) above 1,000 lines, but the few listed in the script, none of which may grow
# (docs/architecture.md).
sizes:
	sh scripts/check_sizes.sh

# Instructions, locked operations, TSC reads, divisions and L1 misses per call of each hot path, under callgrind.
bench-ir:
	@sh scripts/deps.sh --bench-ir
	sh scripts/bench_ir.sh build-ir

format:
	sh scripts/format.sh --fix

format-check:
	sh scripts/format.sh

clean:
	rm -rf build build-check build-asan build-tsan build-nosqlite build-bench build-ir build-abi build-package
