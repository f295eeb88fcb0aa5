// Package quota is Apache Kafka's client-quota arithmetic for a Go host:
// the sampled [Rate] a quota is measured with (Kafka's
// org.apache.kafka.common.metrics.stats.Rate over a windowed sum), the
// throttle time that brings a rate back to its bound ([ThrottleTime],
// Kafka's QuotaUtils), and a [Manager] that keeps the quotas of users and
// client ids (producer_byte_rate, consumer_byte_rate, request_percentage)
// and answers, for one request, how long its client is to be throttled
// (Kafka's ClientQuotaManager and ClientRequestQuotaManager).
//
// A rate sums what is recorded in [Config.Samples] windows of
// [Config.Window] each (Kafka's quota.window.num, default 11, and
// quota.window.size.seconds, default 1). It divides the sum by the time
// since the oldest window began, counted as at least Samples-1 whole
// windows, so that a burst after a quiet spell is measured over the whole
// span and the first requests of a client are not throttled for being
// first.
//
// A quota belongs to an [Entity]: a user (the name of the principal), a
// client id, or both, where either may be the default of its kind. For a
// request of user U with client id C the manager applies the first quota
// it finds in Kafka's order: U with C, U with the default client id, U
// alone, the default user with C, the default user with the default client
// id, the default user alone, C alone, the default client id alone. Every
// client the chosen entity covers shares one rate: a quota of user U alone
// bounds the sum of all of U's client ids, as in Kafka.
//
// The package is a leaf: it imports only the standard library. A host
// records each request's bytes (or handler time, see [ThreadPercent])
// with [Manager.Record], sends the response with the throttle time it
// returns, and mutes the connection for that long (socketserver's
// Request.Throttle).
package quota
