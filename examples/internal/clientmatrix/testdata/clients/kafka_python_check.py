#!/usr/bin/env python3
"""Check a broker with kafka-python: metadata, create topic, produce, consume.

Usage: kafka_python_check.py BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]

MECHANISM is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 for a SASL_PLAINTEXT
listener, or PLAINTEXT for no SASL (USER and PASSWORD are then ignored).
With KAFKANET_CHECK_CA set to a PEM CA file the connection is TLS
(SASL_SSL, or SSL without SASL), trusting that CA.
kafka-python 2.0.2 (Debian's python3-kafka) authenticates with
SaslHandshake v0 followed by raw, unframed SASL tokens, and probes the
broker's version with Metadata v0. The script reads the cluster's metadata
(KafkaAdminClient.describe_cluster), creates TOPIC with P partitions
(create_topics), produces N records spread over them, and consumes them
back: without GROUP from assigned partitions, with GROUP through that
consumer group (join, consume, commit, leave). It prints "OK kafka-python
VERSION MECHANISM brokers=B ..." on success. Any failure exits 1 with
"FAIL kafka-python: ..." on stderr; every step has a timeout.

A refused password cannot be reported to a SaslHandshake v0 client: the
broker (like Apache Kafka) closes the connection. kafka-python then logs a
receive error for a connection in the <authenticating> state and gives up
with NoBrokersAvailable; the script reports that as "SASL authentication
failed".
"""
import logging
import os
import sys
import time

N = 9
P = 3
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
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, mechanism, user, password, topic = sys.argv[1:6]
    group = sys.argv[6] if len(sys.argv) == 7 else None
    watch = AuthWatch()
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(watch)
    kafka_log.propagate = False  # no tracebacks on stderr
    try:
        import kafka
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import KafkaAdminClient, NewTopic
        from kafka.errors import KafkaError
    except ImportError as e:
        fail("kafka-python is not installed (apt-get install python3-kafka): %s" % e)

    common = dict(
        bootstrap_servers=[bootstrap],
        client_id="kafka-python-check",
        request_timeout_ms=TIMEOUT_S * 1000,
        api_version_auto_timeout_ms=TIMEOUT_S * 1000,
    )
    ca = os.environ.get("KAFKANET_CHECK_CA", "")
    sasl = mechanism != "PLAINTEXT"
    common["security_protocol"] = ("SASL_" if sasl else "") + ("SSL" if ca else "PLAINTEXT")
    if ca:
        common["ssl_cafile"] = ca
    if sasl:
        common.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
        )
    values = sorted(("value-%d" % i).encode() for i in range(N))

    try:
        admin = KafkaAdminClient(**common)
    except KafkaError as e:
        connect_error("admin", e, watch)
    try:
        brokers = len(admin.describe_cluster()["brokers"])
        resp = admin.create_topics([NewTopic(topic, num_partitions=P, replication_factor=1)], timeout_ms=TIMEOUT_S * 1000)
        for name, code, *_ in resp.topic_errors:
            if code != 0:
                fail("create_topics %s: error code %d" % (name, code))
    except KafkaError as e:
        fail("admin failed: %r" % e)
    finally:
        admin.close()

    try:
        producer = KafkaProducer(max_block_ms=TIMEOUT_S * 1000, **common)
    except KafkaError as e:
        connect_error("producer", e, watch)
    try:
        for i, v in enumerate(values):
            producer.send(topic, value=v, partition=i % P).get(timeout=TIMEOUT_S)
        producer.flush(timeout=TIMEOUT_S)
    except KafkaError as e:
        fail("produce failed: %r" % e)
    finally:
        producer.close(timeout=5)

    try:
        if group is None:
            consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, **common)
        else:
            consumer = KafkaConsumer(group_id=group, enable_auto_commit=False, auto_offset_reset="earliest",
                                     session_timeout_ms=10000, heartbeat_interval_ms=1000, **common)
    except KafkaError as e:
        connect_error("consumer", e, watch)
    got = []
    try:
        if group is None:
            tps = [TopicPartition(topic, p) for p in range(P)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        if group is not None and len(got) == N:
            consumer.commit()
    except KafkaError as e:
        fail("consume failed: %r" % e)
    finally:
        consumer.close()
    if sorted(got) != values:
        fail("consumed %d of %d records: %r" % (len(got), N, got))
    how = "through group %s, committed" % group if group else "from assigned partitions"
    print("OK kafka-python %s %s brokers=%d produced and consumed %d records %s" % (
        kafka.__version__, mechanism, brokers, N, how))


if __name__ == "__main__":
    main()
