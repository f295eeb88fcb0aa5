package config_test

import (
	"errors"
	"fmt"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
)

func ExampleListeners() {
	// Clients and replication both speak SASL_SSL, on separate listeners
	// (KIP-103); a third listener serves the controller's requests on a
	// plane of their own (KIP-291).
	cfg, err := config.Listeners(config.Properties{
		"listeners":                      "CLIENT://:9092,REPLICATION://:9093,CONTROLLER://:9094",
		"advertised.listeners":           "CLIENT://kafka.example.com:9092,REPLICATION://10.0.0.1:9093,CONTROLLER://10.0.0.1:9094",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SASL_SSL,CONTROLLER:SSL",
		"inter.broker.listener.name":     "REPLICATION",
		"control.plane.listener.name":    "CONTROLLER",
	})
	if err != nil {
		panic(err)
	}
	for _, l := range cfg.All {
		fmt.Println(l.Name, l.Bind.Address(), l.Advertised.Address(), l.SecurityProtocol, l.Plane, l.InterBroker)
	}

	_, err = config.Listeners(config.Properties{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Key, errors.Is(err, listener.ErrNonRoutable))
	}
	// Output:
	// CLIENT :9092 kafka.example.com:9092 SASL_SSL data false
	// REPLICATION :9093 10.0.0.1:9093 SASL_SSL data true
	// CONTROLLER :9094 10.0.0.1:9094 SSL control false
	// advertised.listeners true
}
