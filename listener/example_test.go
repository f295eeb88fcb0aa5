package listener_test

import (
	"fmt"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func ExampleParseEndPoint() {
	ep, err := listener.ParseEndPoint("client://::1:9092", protocolmap.Map{"CLIENT": protocolmap.SSL})
	if err != nil {
		panic(err)
	}
	fmt.Println(ep, ep.SecurityProtocol)
	// Output: CLIENT://[::1]:9092 SSL
}
