#!/usr/bin/env python3
"""Fanout on Apache Spark: recipient shards evaluated one task each, merged.

    python deploy/spark/fanout_spark.py --snapshot S --messages T --shards N --out DIR \
        [--shards-dir D] [--fanout BINARY] [--master URL] [--threads-per-task K] [--decisions]

(or the same arguments after `spark-submit deploy/spark/fanout_spark.py`).

1. Splits S into N shard snapshots with `fanout snapshot split` (unless
   --shards-dir names a folder that already holds shard-K-of-N.sqlite files,
   e.g. written by a warehouse job: docs/scale-out.md).
2. Runs one Spark task per shard (`mapPartitionsWithIndex`): `fanout eval
   --mergeable` on that shard and the whole traffic. Each task returns its
   exit code and the tail of its standard error to the driver.
3. If every shard succeeded, `fanout merge` writes DIR: the files one
   `fanout eval` on S writes. If one failed, the job fails with that shard's
   own error message and exit code, and DIR is not written.

Paths (snapshot, traffic, shards, work folder, the fanout binary) must be
readable by every executor at the same path: local mode, or a shared file
system on a cluster (docs/scale-out.md says how to ship the binary).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

EXIT_SHARD_FAILED = 1


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--snapshot", required=True, help="the whole snapshot (SQLite)")
    p.add_argument("--messages", required=True, help="the traffic (NDJSON), sent to every shard")
    p.add_argument("--shards", type=int, required=True, help="number of shards (at least 1)")
    p.add_argument("--out", required=True, help="output folder: must not exist or be empty")
    p.add_argument("--shards-dir", help="already split shards (shard-K-of-N.sqlite)")
    p.add_argument("--fanout", help="the fanout binary (default: .build/release/fanout, then PATH)")
    p.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[2])")
    p.add_argument("--threads-per-task", type=int, default=1, help="fanout eval --threads per task")
    p.add_argument("--decisions", action="store_true", help="also write decisions.ndjson.lz4")
    p.add_argument("--work", help="folder for shard outputs (default: a new folder beside --out)")
    args = p.parse_args(argv)
    if args.shards < 1:
        p.error("--shards must be at least 1")
    if args.threads_per_task < 1:
        p.error("--threads-per-task must be at least 1")
    return args


def find_fanout(given):
    if given:
        return os.path.abspath(given)
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", ".build", "release", "fanout")
    if os.path.exists(built):
        return os.path.abspath(built)
    found = shutil.which("fanout")
    if not found:
        sys.exit("fanout_spark: no fanout binary: build it (make build) or pass --fanout")
    return found


def run(cmd):
    """Runs a fanout command on the driver; exits with its code if it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(done.returncode)
    return done.stdout


def shard_task(fanout, shards_dir, messages, work, count, threads, decisions):
    """The per-partition function: partition k evaluates shard k."""

    def evaluate(k, _rows):
        snapshot = os.path.join(shards_dir, "shard-%d-of-%d.sqlite" % (k, count))
        out = os.path.join(work, "shard-%d" % k)
        cmd = [fanout, "eval", "--snapshot", snapshot, "--messages", messages, "--out", out,
               "--mergeable", "--overwrite", "--threads", str(threads)]
        if decisions:
            cmd.append("--decisions")
        done = subprocess.run(cmd, capture_output=True, text=True)
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        yield (k, done.returncode, tail, out)

    return evaluate


def main(argv):
    args = parse_args(argv)
    fanout = find_fanout(args.fanout)
    snapshot = os.path.abspath(args.snapshot)
    messages = os.path.abspath(args.messages)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(
        prefix=".fanout-spark-", dir=os.path.dirname(out))
    created_work = not args.work

    if args.shards_dir:
        shards_dir = os.path.abspath(args.shards_dir)
        for k in range(args.shards):
            path = os.path.join(shards_dir, "shard-%d-of-%d.sqlite" % (k, args.shards))
            if not os.path.exists(path):
                sys.exit("fanout_spark: %s is missing" % path)
    else:
        shards_dir = os.path.join(work, "shards")
        run([fanout, "snapshot", "split", snapshot, "--shards", str(args.shards),
             "--out", shards_dir])

    # Local mode binds to the machine's name; loopback works everywhere.
    master = args.master
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if (master or ("" if submitted else "local")).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # after SPARK_LOCAL_IP is set

    builder = (SparkSession.builder.appName("fanout")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.ui.enabled", "false")
               # One task per shard, never retried: a refusal is final.
               .config("spark.task.maxFailures", "1"))
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python, not spark-submit
        builder = builder.master("local[2]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        task = shard_task(fanout, shards_dir, messages, work, args.shards,
                          args.threads_per_task, args.decisions)
        results = sorted(spark.sparkContext.parallelize(range(args.shards), args.shards)
                         .mapPartitionsWithIndex(task).collect())
    finally:
        spark.stop()

    failed = [r for r in results if r[1] != 0]
    for k, code, tail, _ in failed:
        sys.stderr.write("fanout_spark: shard %d of %d failed (exit %d): %s\n"
                         % (k, args.shards, code, tail))
    if failed:
        sys.exit(failed[0][1] or EXIT_SHARD_FAILED)
    if len(results) != args.shards:
        sys.exit("fanout_spark: %d of %d shards reported back" % (len(results), args.shards))

    sys.stdout.write(run([fanout, "merge", "--out", out] + [r[3] for r in results]))
    if created_work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
