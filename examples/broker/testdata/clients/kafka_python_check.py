#!/usr/bin/env python3
"""Produce and consume through a SASL_PLAINTEXT listener with kafka-python.

Usage: kafka_python_check.py BOOTSTRAP MECHANISM USER PASSWORD

kafka-python 2.0.2 (Debian's python3-kafka) authenticates with SaslHandshake
v0 followed by raw, unframed SASL tokens. The script produces N records to a
new topic (created by the broker on first use), consumes them back from
partition 0 with an assigned partition (no consumer group), and prints
"OK kafka-python ..." on success. Any failure exits non-zero with a message
on stderr; every step has a timeout.

A refused password cannot be reported to a SaslHandshake v0 client: the
broker (like Apache Kafka) closes the connection. kafka-python then logs a
receive error for a connection in the <authenticating> state and gives up
with NoBrokersAvailable; the script reports that as "SASL authentication
failed".
"""
import logging
import sys
import time
import uuid

N = 10
TIMEOUT_S = 20


def fail(msg):
    print("FAIL kafka-python: " + msg, file=sys.stderr)
    sys.exit(1)


class AuthWatch(logging.Handler):
    """Notes kafka-python's errors on connections that are authenticating."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.failed = None

    def emit(self, record):
        msg = record.getMessage()
        if "<authenticating>" in msg or "Authentication failed" in msg:
            self.failed = msg


def connect_error(what, e, watch):
    if watch.failed is not None:
        fail("%s: SASL authentication failed: the broker closed the connection "
             "while authenticating (kafka-python logged: %s)" % (what, watch.failed))
    fail("%s could not connect: %r" % (what, e))


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, mechanism, user, password = sys.argv[1:5]
    watch = AuthWatch()
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(watch)
    kafka_log.propagate = False  # no tracebacks on stderr
    try:
        import kafka
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.errors import KafkaError
    except ImportError as e:
        fail("kafka-python is not installed (apt-get install python3-kafka): %s" % e)

    common = dict(
        bootstrap_servers=[bootstrap],
        client_id="kafka-python-check",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=TIMEOUT_S * 1000,
        api_version_auto_timeout_ms=TIMEOUT_S * 1000,
    )
    topic = "kafka-python-" + uuid.uuid4().hex[:8]
    values = [("value-%d" % i).encode() for i in range(N)]
    try:
        producer = KafkaProducer(max_block_ms=TIMEOUT_S * 1000, **common)
    except KafkaError as e:
        connect_error("producer", e, watch)
    try:
        for v in values:
            producer.send(topic, value=v, partition=0).get(timeout=TIMEOUT_S)
        producer.flush(timeout=TIMEOUT_S)
    except KafkaError as e:
        fail("produce failed: %r" % e)
    finally:
        producer.close(timeout=5)

    try:
        consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, **common)
    except KafkaError as e:
        connect_error("consumer", e, watch)
    got = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(r.value for r in records)
    except KafkaError as e:
        fail("consume failed: %r" % e)
    finally:
        consumer.close()
    if got != values:
        fail("consumed %d of %d records: %r" % (len(got), N, got))
    print("OK kafka-python %s %s produced and consumed %d records as %s" % (kafka.__version__, mechanism, N, user))


if __name__ == "__main__":
    main()
