#!/usr/bin/env python3
"""Check SASL/OAUTHBEARER with confluent-kafka (librdkafka): metadata, produce.

Usage: oauth_confluent.py BOOTSTRAP TOKEN TOPIC

TOKEN is a JWT that oauth_cb hands librdkafka, or unsecure:PRINCIPAL to have
librdkafka write its own unsigned JWT for PRINCIPAL
(enable.sasl.oauthbearer.unsecure.jwt=true,
sasl.oauthbearer.config=principal=PRINCIPAL). On a SASL_PLAINTEXT listener
the script reads the cluster's metadata and produces N records to
partition 0 of TOPIC, which must exist. It prints "OK confluent-kafka
VERSION OAUTHBEARER brokers=B ..." on success; a refused token, which
librdkafka reports to error_cb, fails at once with "FAIL confluent-kafka:
SASL authentication failed: ..." on stderr, and any other failure exits 1
too. Every step has a timeout.
"""
import sys
import time

N = 3
TIMEOUT_S = 20


def fail(msg):
    print("FAIL confluent-kafka: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, token, topic = sys.argv[1:4]
    try:
        import confluent_kafka
        from confluent_kafka import KafkaError, KafkaException, Producer
    except ImportError as e:
        fail("confluent-kafka is not installed (apt-get install python3-confluent-kafka): %s" % e)

    def on_error(err):
        if err.code() == KafkaError._AUTHENTICATION:
            fail("SASL authentication failed: %s" % err.str())

    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": "confluent-kafka-oauth",
        "error_cb": on_error,
        "socket.timeout.ms": TIMEOUT_S * 1000,
        "message.timeout.ms": TIMEOUT_S * 1000,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
    }
    if token.startswith("unsecure:"):
        conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
        conf["sasl.oauthbearer.config"] = "principal=" + token[len("unsecure:"):]
    else:
        # librdkafka asks for a token from poll(); the expiry only times
        # its next request for one.
        conf["oauth_cb"] = lambda _config: (token, time.time() + 3600)
    producer = Producer(conf)
    deadline = time.monotonic() + TIMEOUT_S
    md = None
    while md is None:
        producer.poll(0.1)  # serves oauth_cb and error_cb
        try:
            md = producer.list_topics(timeout=1)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
    if not md.brokers:
        fail("metadata lists no brokers")
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            fail("delivery failed: %s" % err.str())
        delivered.append(msg.offset())

    for i in range(N):
        producer.produce(topic, value=b"oauth-%d" % i, partition=0, on_delivery=on_delivery)
    if producer.flush(TIMEOUT_S) or len(delivered) != N:
        fail("%d of %d records not delivered" % (N - len(delivered), N))
    print("OK confluent-kafka %s (librdkafka %s) OAUTHBEARER brokers=%d produced %d records"
          % (confluent_kafka.version()[0], confluent_kafka.libversion()[0], len(md.brokers), N))


if __name__ == "__main__":
    main()
