# Kafka Placement Operator (kpo): developer entry points.
#   make demo   the main job: ZooKeeper, control plane, 3 brokers and the operator; a throttled
#               PartitionReassignment applied with kubectl, watched, verified; then stops
#   make demo-down  stop whatever a demo (--hold, or interrupted) left running
#   make test   install everything, lint, type-check, build the docs and run the whole test suite
#   make docs   regenerate the reference pages and build the documentation site into site/
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
PYTEST_ARGS ?=
# `make test` runs the suite on this many pytest-xdist workers, a test module per worker at a
# time (its fixtures start once); the suite waits far more than it computes.
TEST_WORKERS ?= 3

.PHONY: all install tools demo-tools demo-setup lint docs docs-check format typecheck test test-unit test-integration soak test-real-node demo demo-containers demo-down bench image lock e2e-kind sync-crds clean

all: test

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,placement]'
	touch $@

install: $(INSTALLED)

# External tools (ZooKeeper, etcd, kube-apiserver, kubectl, helm..., and Apache Kafka's
# jars for the operator's tests beside Kafka's own tools) into $KPO_TOOLS_DIR (default
# ~/.cache/kpo-tools); versions in tools/versions.env.
tools:
	bash tools/install.sh
	bash tools/install-kafka.sh >/dev/null
	bash tools/install-kafka.sh 4 >/dev/null
	bash tools/install-jmx-exporter.sh >/dev/null

# ruff; the layer contracts (import-linter, [tool.importlinter] in pyproject.toml); docs, code
# and comments that speak of the product only (tools/check_wording.py).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python tools/check_wording.py

# The documentation site (docs/, mkdocs.yml): the generated reference pages written anew from
# what defines them, then `mkdocs build --strict` (a broken link or a page missing from the
# navigation fails) into site/.
docs: install
	$(BIN)/python -m tools.docgen
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy --explicit-package-bases -p tools.docgen -m tools.check_wording

test: install tools lint typecheck docs-check
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --durations=25 $(PYTEST_ARGS)

# The site built as `make docs` does, without rewriting the generated pages (the tests in
# tests/unit/docs fail when one is stale).
docs-check: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test-unit: install
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

test-integration: install tools
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

# The fault suite's soak: KPO_FAULT_COUNT faults (default 100) from KPO_FAULT_SEED.
KPO_FAULT_COUNT ?= 100
KPO_FAULT_SEED ?= 16
soak: install tools
	KPO_FAULT_COUNT=$(KPO_FAULT_COUNT) KPO_FAULT_SEED=$(KPO_FAULT_SEED) \
		$(BIN)/pytest tests/integration/broker/faults -m faults -s --timeout=0 $(PYTEST_ARGS)

# helm install of the whole chart on a real node (containerd, kubelet, kube-proxy, CoreDNS)
# running kpo's images as pods, and helm test. Not in `make test`: the node's tools (Debian's
# containerd, the kubelet, kube-proxy and CoreDNS from the Go module proxy) are not part of
# `make tools`; the test skips without them.
test-real-node: install tools
	bash tools/install.sh node
	bash tools/containers.sh engine
	$(BIN)/pytest tests/integration/containers/test_real_node.py $(PYTEST_ARGS)

# Only what the demo runs: ZooKeeper, etcd, kube-apiserver, kubectl (a first run builds less).
demo-tools:
	bash tools/install.sh demo

# The Python environment and the demo's tools side by side (a first run: pip waits on the
# network while Go compiles, docs/development/tests.md).
demo-setup:
	$(MAKE) --no-print-directory -j2 install demo-tools

# The demo's fleet is secured (SASL_SSL with SCRAM for clients, mutual TLS between brokers,
# ACLs, ZooKeeper SASL); DEMO_ARGS=--plaintext runs it without security: development only.
demo: demo-setup
	$(BIN)/python -m kpo_devenv demo $(DEMO_ARGS)

# The main job with ZooKeeper, the brokers and the operator in podman containers of the images
# (the control plane stays as processes); every container is stopped and removed at the end.
demo-containers: demo-setup
	IMAGE=$(IMAGE) bash tools/build-images.sh kpo zookeeper
	$(BIN)/python -m kpo_devenv demo --containers --image $(IMAGE) $(DEMO_ARGS)

demo-down: install
	$(BIN)/python -m kpo_devenv demo-down

# Benchmark kpo's brokers against Apache Kafka (not part of the tests): prints ratios
# measured in the same run. BENCH_ARGS=--quick for a short run.
bench: install
	bash tools/install.sh zookeeper
	bash tools/install-kafka.sh >/dev/null
	$(BIN)/python -m kpo_bench $(BENCH_ARGS)

# The images (broker-image/Dockerfile): IMAGE (broker, operator; no Java) and PLACEMENT_IMAGE
# (PySpark and Java), with docker when its daemon answers, else podman (installed with apt
# when missing, with runc and a Debian-made base when BASE_IMAGE is empty): tools/build-images.sh.
IMAGE ?= ghcr.io/kpo-dev/kpo:dev
PLACEMENT_IMAGE ?= ghcr.io/kpo-dev/kpo-placement:dev
BASE_IMAGE ?=
image:
	IMAGE=$(IMAGE) PLACEMENT_IMAGE=$(PLACEMENT_IMAGE) BASE_IMAGE=$(BASE_IMAGE) bash tools/build-images.sh kpo placement

# requirements/*.lock: the images' Python dependencies with hashes, from pyproject.toml.
lock: install
	$(BIN)/pip install -q pip-tools
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile -q --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links -o requirements/broker.lock pyproject.toml
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile -q --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links --extra placement -o requirements/placement.lock pyproject.toml

# The main job against the chart installed in a kind cluster (needs docker/podman and kind).
e2e-kind:
	bash tools/e2e-kind.sh

# The chart ships the same CRDs as crds/ (tests/unit/crds checks they are identical).
sync-crds:
	cp crds/*.yaml charts/kpo/crds/

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
