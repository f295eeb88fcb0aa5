// Command broker is kafkanet's example broker. It resolves a broker's
// listener configuration the way Apache Kafka does and prints one row per
// listener: where it binds, what it advertises, its security protocol, the
// request plane it feeds and whether brokers use it among themselves.
//
// Usage:
//
//	broker [-check] [-config server.properties] [-set key=value]...
//
// The configuration is read from the Java .properties file given with
// -config, with each -set key=value laid over it, and keys set in neither
// take Kafka's defaults (listeners=PLAINTEXT://:9092 and so on). When neither
// -config nor -set is given, the broker instead uses built-in settings that
// show off KIP-103: four named listeners, two of which share the PLAINTEXT
// protocol, a separate inter-broker listener and a control-plane listener.
//
// With -check the broker only validates the configuration and prints the
// table. An invalid configuration is reported on standard error, naming the
// offending key, and the exit status is 1; nothing is bound. Bad flags give
// exit status 2.
//
// Serving is not implemented yet: without -check the broker prints the table
// and says so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/kafkanet/kafkanet/listener"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// defaultProperties returns the settings the broker runs with when neither
// -config nor -set is given. They demonstrate KIP-103: clients connect to
// CLIENT with SASL_PLAINTEXT, while REPLICATION, INTERNAL and CONTROLLER all
// speak PLAINTEXT under their own names; brokers replicate over REPLICATION
// and controller requests arrive on CONTROLLER, the control plane of KIP-291.
// Every listener binds the loopback interface, so the defaults expose
// nothing.
func defaultProperties() listener.Properties {
	return listener.Properties{
		listener.KeyListeners:                "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095",
		listener.KeySecurityProtocolMap:      "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		listener.KeyInterBrokerListenerName:  "REPLICATION",
		listener.KeyControlPlaneListenerName: "CONTROLLER",
	}
}

// settings collects the values of the repeatable -set flag.
type settings []string

func (s *settings) String() string { return strings.Join(*s, " ") }

func (s *settings) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return errors.New("want key=value")
	}
	*s = append(*s, v)
	return nil
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "validate the configuration, print the listeners and exit")
	configPath := fs.String("config", "", "read broker settings from the Java .properties `file`")
	var sets settings
	fs.Var(&sets, "set", "set configuration `key=value` over the file's settings (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: broker [-check] [-config server.properties] [-set key=value]...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	cfg, err := resolve(*configPath, sets)
	if err != nil {
		fmt.Fprintf(stderr, "broker: %v\n", err)
		return 1
	}
	if err := printListeners(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "broker: %v\n", err)
		return 1
	}
	if *check {
		return 0
	}
	fmt.Fprintln(stderr, "broker: serving is not implemented yet; the configuration above is valid")
	return 0
}

// resolve reads the configuration file at path, if any, lays sets over it
// and resolves the listeners. With neither a file nor settings it resolves
// defaultProperties.
func resolve(path string, sets []string) (*listener.Config, error) {
	props := listener.Properties{}
	switch {
	case path != "":
		p, err := listener.LoadProperties(path)
		if err != nil {
			return nil, err
		}
		props = p
	case len(sets) == 0:
		props = defaultProperties()
	}
	props, err := props.With(sets...)
	if err != nil {
		return nil, err
	}
	return listener.Resolve(props)
}

// printListeners writes cfg's listeners to w as an aligned table, one row
// per listener in the order of the listeners key. An advertised address of
// "-" means the listener is not in advertised.listeners.
func printListeners(w io.Writer, cfg *listener.Config) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LISTENER\tBIND\tADVERTISED\tPROTOCOL\tPLANE\tINTER-BROKER")
	for _, l := range cfg.Listeners {
		advertised := "-"
		if l.IsAdvertised() {
			advertised = l.Advertised.Address()
		}
		interBroker := "-"
		if l.InterBroker {
			interBroker = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
			l.Name, l.Bind.Address(), advertised, l.SecurityProtocol, l.Plane, interBroker)
	}
	return tw.Flush()
}
