#!/usr/bin/env python3
"""Check SASL/OAUTHBEARER with kafka-python: metadata, produce.

Usage: oauth_kafka_python.py BOOTSTRAP TOKEN TOPIC

kafka-python 2.0.2 (Debian's python3-kafka) sends the token from its
sasl_oauth_token_provider after SaslHandshake v0, as a raw frame, and takes
an empty frame for success. On a SASL_PLAINTEXT listener the script reads
the partitions of TOPIC, which must exist, and produces N records to
partition 0. It prints "OK kafka-python VERSION OAUTHBEARER ..." on success.
A refused token's error challenge is a frame that is not empty, which
kafka-python reports as AuthenticationFailedError: the script reports
"FAIL kafka-python: SASL authentication failed: ..."; any failure exits 1.
"""
import logging
import sys

N = 3
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
        if "<authenticating>" in msg or "Authentication failed" in msg or "authentication failed" in msg:
            self.failed = msg


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, token, topic = sys.argv[1:4]
    watch = AuthWatch()
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(watch)
    kafka_log.propagate = False
    try:
        import kafka
        from kafka import KafkaProducer
        from kafka.errors import AuthenticationFailedError, KafkaError
        from kafka.oauth.abstract import AbstractTokenProvider
    except ImportError as e:
        fail("kafka-python is not installed (apt-get install python3-kafka): %s" % e)

    class Token(AbstractTokenProvider):
        def token(self):
            return token

    try:
        producer = KafkaProducer(
            bootstrap_servers=[bootstrap], client_id="kafka-python-oauth",
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Token(),
            request_timeout_ms=TIMEOUT_S * 1000, api_version_auto_timeout_ms=TIMEOUT_S * 1000,
            max_block_ms=TIMEOUT_S * 1000)
    except KafkaError as e:
        # A refused token's error challenge is no empty frame:
        # kafka-python raises AuthenticationFailedError for it.
        if isinstance(e, AuthenticationFailedError) or watch.failed is not None:
            fail("SASL authentication failed: the broker refused the token: %r (kafka-python logged: %s)" % (e, watch.failed))
        fail("could not connect: %r" % e)
    try:
        partitions = producer.partitions_for(topic)
        if not partitions:
            fail("no partitions for %s" % topic)
        for i in range(N):
            producer.send(topic, value=b"oauth-%d" % i, partition=0).get(timeout=TIMEOUT_S)
    except KafkaError as e:
        fail("produce failed: %r" % e)
    finally:
        producer.close(timeout=5)
    print("OK kafka-python %s OAUTHBEARER produced %d records" % (kafka.__version__, N))


if __name__ == "__main__":
    main()
