# moesim quick start: `make demo` runs the main job, `make test` runs every test.
# Both install the Debian packages they need first (scripts/install_deps.sh is idempotent).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: deps configure build demo test bench clean format

deps:
	./scripts/install_deps.sh

configure: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	./scripts/bench.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD)

# Record -> CPU replay -> calibrate -> validate on the tiny model and a reduced DeepSeek-V3 slice
# (docs/calibration.md); writes profiles/cpu-<machine>.toml and its validation reports.
.PHONY: calibrate-cpu
calibrate-cpu: build
	./scripts/calibrate_cpu.sh $(BUILD)
