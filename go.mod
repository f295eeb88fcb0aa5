module github.com/kafkanet/kafkanet

go 1.26.0

require (
	github.com/magiconair/properties v1.18.13
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.25.0 // indirect
)
