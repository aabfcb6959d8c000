# Fanout: `make demo` runs the sample, `make test` runs the whole suite.
# Both install the Debian packages they need first (as root, or with sudo).

SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS := liblz4-dev libsqlite3-dev lz4 sqlite3 tzdata pkg-config libhiredis-dev redis-server
# What only the suite needs: promtool (Debian's prometheus) checks the metrics file.
TEST_DEBS := prometheus
FANOUT := .build/release/fanout
SAMPLE := datasets/sample
DEMO_OUT := out/demo

.PHONY: deps test-deps build install demo whatif-demo sweep-demo audit-demo stream-demo redis-demo spark-env spark-demo report-env report-check lint test bench bench-thresholds clean

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

# A sweep on the sample: quiet hours 21-07, 22-08 and 23-09, each against A, in one pass.
SWEEP_OUT := out/sweep
sweep-demo: build $(SAMPLE)/snapshot.sqlite
	$(FANOUT) whatif --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --out $(SWEEP_OUT) --overwrite \
	  --variant q21-07=datasets/scenarios/quiet-hours-21-07.sql \
	  --variant q22-08=datasets/scenarios/quiet-hours-22-08.sql \
	  --variant q23-09=datasets/scenarios/quiet-hours-23-09.sql

# An audit on the sample: eval's own gateway files, m4's FCM push left out, and
# datasets/audit/extra-sent.ndjson (a push in quiet hours, a second push, a stale
# token, an unknown message) as the sent log.
AUDIT_OUT := out/audit
audit-demo: build $(SAMPLE)/snapshot.sqlite
	$(FANOUT) eval --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --out $(AUDIT_OUT)-day --overwrite
	lz4 -dc $(AUDIT_OUT)-day/fcm.ndjson.lz4 | grep -v '"message":"m4"' > $(AUDIT_OUT)-fcm-without-m4.ndjson
	$(FANOUT) audit --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --sent $(AUDIT_OUT)-day/apns.ndjson.lz4 $(AUDIT_OUT)-day/email.ndjson.lz4 \
	  $(AUDIT_OUT)-day/webpush.ndjson.lz4 $(AUDIT_OUT)-fcm-without-m4.ndjson datasets/audit/extra-sent.ndjson \
	  --out $(AUDIT_OUT) --overwrite

# The sample through `fanout stream`, to the end of input: segment files in out/stream.
STREAM_OUT := out/stream
stream-demo: build $(SAMPLE)/snapshot.sqlite
	rm -rf $(STREAM_OUT)
	$(FANOUT) stream --snapshot $(SAMPLE)/snapshot.sqlite --out $(STREAM_OUT) < $(SAMPLE)/traffic.ndjson
	@echo; ls $(STREAM_OUT); echo; echo "== $(STREAM_OUT)/batches-000001.ndjson"; cat $(STREAM_OUT)/batches-000001.ndjson

# The sample through `fanout stream --redis` on a private redis-server (deploy/redis/demo.sh).
redis-demo: build $(SAMPLE)/snapshot.sqlite
	deploy/redis/demo.sh $(FANOUT) $(SAMPLE)/snapshot.sqlite $(SAMPLE)/traffic.ndjson

# Apache Spark (deploy/spark, docs/scale-out.md): pyspark from PyPI in .venv-spark,
# Java 17 from Debian if no java is installed.
SPARK_VENV := .venv-spark
spark-env: $(SPARK_VENV)/.installed
$(SPARK_VENV)/.installed:
	@command -v java >/dev/null 2>&1 || { echo "installing Java 17"; $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }
	python3 -m venv $(SPARK_VENV)
	$(SPARK_VENV)/bin/pip install -q --disable-pip-version-check pyspark
	touch $@

# The sample in 3 recipient shards on Spark (local mode), compared with one `fanout eval`.
SPARK_OUT := out/spark
spark-demo: build spark-env $(SAMPLE)/snapshot.sqlite
	rm -rf $(SPARK_OUT)
	$(SPARK_VENV)/bin/python deploy/spark/fanout_spark.py --snapshot $(SAMPLE)/snapshot.sqlite \
	  --messages $(SAMPLE)/traffic.ndjson --shards 3 --out $(SPARK_OUT)/merged --master 'local[2]' --decisions
	$(FANOUT) eval --snapshot $(SAMPLE)/snapshot.sqlite --messages $(SAMPLE)/traffic.ndjson \
	  --out $(SPARK_OUT)/one-node --decisions
	@for f in $$(ls $(SPARK_OUT)/one-node); do \
	  if [ $$f = summary.json ]; then \
	    diff <(grep -v -e second -e timings $(SPARK_OUT)/one-node/$$f) <(grep -v -e second -e timings $(SPARK_OUT)/merged/$$f) || exit 1; \
	  else cmp $(SPARK_OUT)/one-node/$$f $(SPARK_OUT)/merged/$$f || exit 1; fi; \
	done; echo "Spark, 3 shards: the same files as one fanout eval ($(SPARK_OUT)/merged, $(SPARK_OUT)/one-node)"

# The HTML reports in a real browser: headless Chromium and chromedriver from
# Debian, Selenium from PyPI in .venv-report. .ci/check-report.py renders each
# page at 390 px (a phone) and 1280 px and fails on horizontal overflow, a
# missing headline or an empty chart; screenshots land beside the pages.
REPORT_VENV := .venv-report
report-env: $(REPORT_VENV)/.installed
$(REPORT_VENV)/.installed:
	@missing=""; for p in chromium chromium-driver; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the report check:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	python3 -m venv $(REPORT_VENV)
	$(REPORT_VENV)/bin/pip install -q --disable-pip-version-check selenium
	touch $@

report-check: whatif-demo sweep-demo audit-demo report-env
	$(REPORT_VENV)/bin/python .ci/check-report.py $(WHATIF_OUT)/report.html $(SWEEP_OUT)/report.html \
	  $(AUDIT_OUT)/report.html

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

test-deps:
	@missing=""; for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the tests:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

test: deps test-deps lint spark-env report-check
	swift build --build-tests --explicit-target-dependency-import-check error
	@# A hung test (or a child holding its output open) fails the run in 25 minutes, not at the CI limit.
	@# Everything the tests write to a temporary folder goes under one, removed after the run, pass or
	@# fail; open to all like /tmp itself, for the tests that run fanout as another user.
	@# A failed run ends with .ci/test-failures' summary of its log (what failed, what a crash stopped).
	@# (The run writes to a file that `tail` shows: a child left holding a pipe would hang the make.)
	tmp=$$(mktemp -d -t fanout-test.XXXXXX) && chmod 1777 "$$tmp" && log=$$(mktemp -t fanout-test-log.XXXXXX) && \
	  { TMPDIR=$$tmp timeout --kill-after=30 1500 swift test --skip-build > "$$log" 2>&1 & } && \
	  pid=$$! && tail -n +1 -f --pid=$$pid "$$log"; \
	  wait $$pid; status=$$?; [ $$status -eq 0 ] || .ci/test-failures "$$log"; \
	  rm -rf "$$tmp" "$$log"; exit $$status

# Installs the release binary as $(PREFIX)/bin/fanout (PREFIX=/usr/local by default).
PREFIX ?= /usr/local
install: build
	install -D -m 0755 $(FANOUT) $(DESTDIR)$(PREFIX)/bin/fanout

clean:
	rm -rf .build .build-bench out $(SAMPLE)/snapshot.sqlite $(SPARK_VENV) $(REPORT_VENV)
