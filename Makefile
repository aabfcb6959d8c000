# Fanout: `make demo` runs the sample, `make test` runs the whole suite.
# Both install the Debian packages they need first (as root, or with sudo).

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS := liblz4-dev libsqlite3-dev lz4 sqlite3 tzdata pkg-config
FANOUT := .build/release/fanout
SAMPLE := datasets/sample
DEMO_OUT := out/demo

.PHONY: deps build demo whatif-demo stream-demo report-check lint test bench bench-thresholds clean

deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	swift build -c release --product fanout

$(SAMPLE)/snapshot.sqlite: $(SAMPLE)/snapshot.sql build
	rm -f $@ && $(FANOUT) snapshot schema | cat - $(SAMPLE)/snapshot.sql | sqlite3 $@

demo: build $(SAMPLE)/snapshot.sqlite
	$(FANOUT) snapshot check $(SAMPLE)/snapshot.sqlite
	@echo
	$(FANOUT) eval --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --out $(DEMO_OUT) --decisions --overwrite
	@echo; echo "== $(DEMO_OUT)/summary.json"; cat $(DEMO_OUT)/summary.json
	@echo; echo "== $(DEMO_OUT)/rejected.ndjson"; cat $(DEMO_OUT)/rejected.ndjson
	@echo; echo "== first deliveries in $(DEMO_OUT)/apns.ndjson.lz4 (decoded with lz4 -dc)"; \
	  lz4 -dc $(DEMO_OUT)/apns.ndjson.lz4 | head -n 3

# What-if on the sample: everyone without quiet hours gets 22:00-08:00.
WHATIF_OUT := out/whatif
whatif-demo: build $(SAMPLE)/snapshot.sqlite
	$(FANOUT) whatif --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --sql "UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL" \
	  --out $(WHATIF_OUT) --overwrite

# The sample through `fanout stream`, to the end of input: segment files in out/stream.
STREAM_OUT := out/stream
stream-demo: build $(SAMPLE)/snapshot.sqlite
	rm -rf $(STREAM_OUT)
	$(FANOUT) stream --snapshot $(SAMPLE)/snapshot.sqlite --out $(STREAM_OUT) < $(SAMPLE)/traffic.ndjson
	@echo; ls $(STREAM_OUT); echo; echo "== $(STREAM_OUT)/batches-000001.ndjson"; cat $(STREAM_OUT)/batches-000001.ndjson

# Renders that report in headless Chromium (installed if missing) and checks
# the screenshot, $(WHATIF_OUT)/report.png, shows the page and its charts.
report-check: whatif-demo
	@dpkg -s chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,3000 \
	  --screenshot=$(CURDIR)/$(WHATIF_OUT)/report.png file://$(CURDIR)/$(WHATIF_OUT)/report.html 2>/dev/null
	python3 .ci/check-report-screenshot.py $(WHATIF_OUT)/report.png

# Benchmarks: package-benchmark suites in Benchmarks/, built in their own folder.
BENCH := FANOUT_BENCHMARKS=1 swift package --scratch-path .build-bench
bench: deps
	$(BENCH) benchmark --no-progress
	@# `swift package` turns the tool's exit code 4 (improvement only) into 1: read its verdict instead.
	@$(BENCH) benchmark thresholds check --path $(CURDIR)/Benchmarks/Thresholds --no-progress \
	  > .build-bench/threshold-check.log 2>&1; status=$$?; cat .build-bench/threshold-check.log; \
	  if grep -q "Deviations worse than threshold" .build-bench/threshold-check.log; then exit 2; fi; \
	  if [ $$status -ne 0 ] && ! grep -q "BETTER than the defined thresholds" .build-bench/threshold-check.log; then exit $$status; fi

bench-thresholds: deps
	$(BENCH) --allow-writing-to-package-directory benchmark thresholds update --path $(CURDIR)/Benchmarks/Thresholds --no-progress

# Formatting follows `swift format`'s defaults; `swift format -i -r Sources Tests Benchmarks` fixes it.
lint:
	swift format lint --strict -r Sources Tests Benchmarks Package.swift

test: deps lint
	swift build --build-tests --explicit-target-dependency-import-check error
	swift test --skip-build

clean:
	rm -rf .build .build-bench out $(SAMPLE)/snapshot.sqlite
