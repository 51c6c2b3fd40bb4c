# Chronicle: `make demo` runs the main job, `make test` runs the tests.
# Both install the system libraries first when they are missing.

SWIFT ?= swift
APT_PACKAGES := liblz4-dev libsqlite3-dev libxxhash-dev pkg-config sqlite3 postgresql
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build release test docs-check demo bench fuzz clean

all: build

# Idempotent: installs only what pkg-config cannot find.
deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists liblz4 2>/dev/null || missing="$$missing liblz4-dev"; \
	pkg-config --exists sqlite3 2>/dev/null || missing="$$missing libsqlite3-dev"; \
	pkg-config --exists libxxhash 2>/dev/null || missing="$$missing libxxhash-dev"; \
	command -v sqlite3 >/dev/null 2>&1 || missing="$$missing sqlite3"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		echo "==> installing system packages:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The PostgreSQL container's tests run against a throw-away server that
# scripts/with-postgres starts beside the tests and stops after them. The
# tests' folders (devices, containers, CLI inputs) go in a temporary folder
# of the run's own, removed after it, passed or not.
test: deps
	$(SWIFT) build --build-tests
	@scratch="$$(mktemp -d /tmp/chronicle-tests.XXXXXX)"; chmod 755 "$$scratch"; \
	TMPDIR="$$scratch" scripts/with-postgres $(SWIFT) test --skip-build; status=$$?; \
	rm -rf "$$scratch"; exit $$status

# Every public symbol of the Chronicle module has a doc comment and every
# public type is in Sources/Chronicle/Chronicle.docc (the tests check it too).
docs-check: deps
	$(SWIFT) build --target Chronicle
	scripts/check-docs --build-dir "$$($(SWIFT) build --show-bin-path)"

# The main job: five devices syncing through a folder (one turns the cloud off and on), a corruption
# episode, then the seeded multi-device simulation with every fault kind and its invariant checks.
demo: deps
	$(SWIFT) build --product chronicle
	$$($(SWIFT) build --show-bin-path)/chronicle demo
	@echo
	@echo "==> the multi-device simulation: seeded faults, crashes and account switches, then the invariant checks"
	$$($(SWIFT) build --show-bin-path)/chronicle simulate --seed 4
	$$($(SWIFT) build --show-bin-path)/chronicle simulate --seed 1 --seeds 20
	@echo
	@echo "==> the same with every device under a store manager: two turn the cloud on at the same moment; then a toggle, a deletion, a rebuild and the moves they cause"
	$$($(SWIFT) build --show-bin-path)/chronicle simulate --lifecycle --first-enables 2 --rate cloud-deletion=0.01,maintenance=0.03 --seed 15
	@echo
	@echo "==> with corruption faults: logs some devices see damaged, logs nobody can repair; the health monitors mark, elect and rebuild"
	$$($(SWIFT) build --show-bin-path)/chronicle simulate --corruption --seed 2 --seeds 20

bench: deps
	$(SWIFT) build -c release --product chronicle
	$$($(SWIFT) build -c release --show-bin-path)/chronicle bench

# Fuzz the log decoder with libFuzzer and AddressSanitizer for FUZZ_SECONDS
# (see docs/log-format.md, "Fuzzing"). Findings land in Fuzz/.build/findings.
FUZZ_SECONDS ?= 60
fuzz: deps
	cd Fuzz && $(SWIFT) build -c release --product fuzz-log-decoder -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
	bin="$$(cd Fuzz && $(SWIFT) build -c release --show-bin-path)/fuzz-log-decoder"; \
	mkdir -p Fuzz/.build/corpus Fuzz/.build/findings && \
	"$$bin" --write-seeds Fuzz/.build/corpus && \
	SWIFT_BACKTRACE=enable=no "$$bin" Fuzz/.build/corpus -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-artifact_prefix=Fuzz/.build/findings/

clean:
	rm -rf .build
