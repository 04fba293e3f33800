# moesim quick start: `make demo` builds the simulator alone and runs the main job, `make test`
# builds everything and runs every test. Both install the Debian packages they need first
# (scripts/install_deps.sh is idempotent).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
# The demo's own build directory: only the `moesim` target, without tests, benchmarks, the Python
# module or CUDA kernels (none of which the demo runs).
DEMO_BUILD ?= build-demo
DEMO_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DMOESIM_WITH_CUDA=OFF -DMOESIM_BUILD_TESTS=OFF \
  -DMOESIM_BENCHMARKS=OFF -DMOESIM_PYTHON=OFF
# ccache keys on paths relative to the repository, so $(BUILD) reuses what $(DEMO_BUILD) compiled.
export CCACHE_BASEDIR ?= $(CURDIR)

.PHONY: deps demo-deps configure build demo test sanitize bench clean format

deps:
	./scripts/install_deps.sh

demo-deps:
	./scripts/install_deps.sh demo

configure: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: demo-deps
	cmake -S . -B $(DEMO_BUILD) $(DEMO_CMAKE_FLAGS)
	cmake --build $(DEMO_BUILD) -j $(JOBS) --target moesim
	./scripts/demo.sh $(DEMO_BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The sanitizer pass of .ci/run: an ASan + UBSan build (no recovery, leaks checked) of the
# simulator and the CPU engine, CUDA off, running the tests; docs/reliability.md says which are
# left out and why. It compiles with clang (SAN_CXX), which also builds the libFuzzer targets
# (tests/fuzz/) in the same build: `make fuzz` runs each for FUZZ_SECONDS from its seed corpus.
SAN_BUILD ?= build-sanitize
SAN_CXX ?= clang++-14
SAN_EXCLUDE ?= notebook|python\.|report\.|cli\.mpi_sweep|engine_mpi_cpu_replay
# Whole-scenario replays that take over 7 s each under the sanitizers (docs/reliability.md): their
# code paths run instrumented in smaller tests; they run uninstrumented in `make test`.
SAN_SLOW ?= scenarios_units_|cli\.search_threads|PlacementPolicyCompare\.|PolicyStepTraceTest\.|cli\.sweep_resume|cli\.validate_placement_changes|ConcurrencyCapTest\.CapOf32LowersTpotAgainst128OnTheShippedPair|FidelityAgreement\.ThousandGpuDecodeHeavyDeploymentAgrees|EplbPolicy\.MeasuredBalanceAfterARebalanceIsThePredictedOne|QueueIsolationTest\.IsolationImprovesShortRequestTtftP99OnTheShippedPair|PolicyConservationTest\.RequestsInAnAdmissionDelayAreCountedInFlight|LongContextCapTest\.ShippedScenarioRoutesLongPromptsToTheirPool
FUZZ_SECONDS ?= 60
.PHONY: sanitize-build fuzz
sanitize-build: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DMOESIM_SANITIZE=ON \
	  -DMOESIM_WITH_CUDA=OFF -DMOESIM_BENCHMARKS=OFF -DMOESIM_PYTHON=OFF \
	  -DCMAKE_CXX_COMPILER=$(SAN_CXX)
	cmake --build $(SAN_BUILD) -j $(JOBS)

sanitize: sanitize-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS) -E '$(SAN_EXCLUDE)|$(SAN_SLOW)'

fuzz: sanitize-build
	FUZZ_JOBS=$(JOBS) ./scripts/fuzz.sh $(SAN_BUILD) $(FUZZ_SECONDS)

bench: build
	./scripts/bench.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(DEMO_BUILD)

# Record -> CPU replay -> calibrate -> validate on the tiny model and a reduced DeepSeek-V3 slice
# (docs/calibration.md); writes profiles/cpu-<machine>.toml and its validation reports.
.PHONY: calibrate-cpu
calibrate-cpu: build
	./scripts/calibrate_cpu.sh $(BUILD)
