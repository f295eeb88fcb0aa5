package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { os.Exit(bindcheck.Wrap(m).Run()) }

// The README's "Embedding kafkanet" shows this program, whole: the ```go
// block there must be this file, so that what readers copy compiles (the
// examples module builds it) and is tested (below).
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	section := regexp.MustCompile("(?s)\n## Embedding kafkanet\n.*?\n```go\n(.*?)```\n").FindSubmatch(readme)
	require.NotNil(t, section, "README.md has no ```go block under ## Embedding kafkanet")
	assert.Equal(t, string(src), string(section[1]), "README.md's embedding program differs from examples/embed/main.go")
}

// buildEmbed builds the program into a directory of the test's, as a user
// would (go build, in the examples module), and returns the binary's path.
func buildEmbed(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "embed")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// go doc and -h list every flag. main defines them on the flag package's
// own set, which a test cannot reach, so they are read from what the
// built program's -h prints: every flag defined (flag.PrintDefaults).
func TestUsageAndDocListEveryFlag(t *testing.T) {
	out, err := exec.Command(buildEmbed(t), "-h").CombinedOutput()
	require.NoError(t, err, "-h: %s", out)
	flags := flagdoc.UsageFlags(string(out))
	require.NotEmpty(t, flags, "-h lists no flag: %s", out)
	flagdoc.CheckDoc(t, ".", flags)
}

// Pay for what you use: a program that serves no OAUTHBEARER links neither
// go-jose nor the JWKS validator's HTTP client. The binary's build
// information (what go version -m prints) lists every module linked into
// it.
func TestProgramLinksNoJOSE(t *testing.T) {
	info, err := buildinfo.ReadFile(buildEmbed(t))
	require.NoError(t, err)
	var modules []string
	for _, m := range info.Deps {
		modules = append(modules, m.Path)
	}
	require.Contains(t, modules, "github.com/kafkanet/kafkanet", "the build information lists the modules linked")
	for _, m := range modules {
		assert.False(t, strings.HasPrefix(m, "github.com/go-jose/go-jose"), "examples/embed links %s: %v", m, modules)
	}
}

// The program, built and run as a user would: a kgo client reads Metadata
// and lists its own connection through ListClientConnections, then SIGTERM
// shuts the server down gracefully and the program exits with status 0.
func TestProgramServesKgoAndStopsOnSignal(t *testing.T) {
	cmd, addr, logged := startEmbed(t, "PLAINTEXT", "-listeners", "PLAINTEXT://127.0.0.1:0")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), connadmin.VersionsOpt(connregistry.DefaultListAPIKey))
	require.NoError(t, err)
	defer cl.Close()
	mdReq := kmsg.NewPtrMetadataRequest()
	asked := kmsg.NewMetadataRequestTopic()
	asked.Topic = kmsg.StringPtr("orders")
	mdReq.Topics = append(mdReq.Topics, asked)
	md, err := mdReq.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, addr, net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))), "Metadata names the address bound")
	assert.Equal(t, int32(0), md.ControllerID)
	require.Len(t, md.Topics, 1, "the topic asked for is answered")
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, md.Topics[0].ErrorCode)

	res, err := connadmin.New(cl, connregistry.DefaultListAPIKey, 0).List(ctx, connregistry.Filter{}, false)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	require.NotEmpty(t, res[0].Connections)
	assert.Equal(t, "User:ANONYMOUS", res[0].Connections[0].Principal)
	cl.Close()

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit after SIGTERM")
	case <-time.After(15 * time.Second):
		t.Fatal("the program did not exit within 15 s of SIGTERM")
	}
	assert.False(t, strings.Contains(logged.String(), "level=ERROR"), logged.String())
}

// The README's "A SASL listener": the program, given the server.properties
// shown there (its port made 0), serves the users of its JAAS key with
// PLAIN and SCRAM-SHA-256, lists a user's connection under the user's
// principal, and refuses a wrong password.
func TestREADMESASLListener(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)\n### A SASL listener\n.*?\n```properties\n(.*?)```\n").FindSubmatch(readme)
	require.NotNil(t, block, "README.md has no ```properties block under ### A SASL listener")
	props := strings.Replace(string(block[1]), "127.0.0.1:9093", "127.0.0.1:0", 1)
	require.NotEqual(t, string(block[1]), props, "the README's listener is no longer 127.0.0.1:9093")
	file := filepath.Join(t.TempDir(), "sasl.properties")
	require.NoError(t, os.WriteFile(file, []byte(props), 0o600))

	cmd, addr, logged := startEmbed(t, "SASL_PLAINTEXT", file)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mechanism := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mechanism, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), socketservertest.KgoSASL(mechanism, "alice", "alice-secret"),
				connadmin.VersionsOpt(connregistry.DefaultListAPIKey))
			require.NoError(t, err)
			defer cl.Close()
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Len(t, md.Brokers, 1)
			assert.Equal(t, addr, net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))))
			res, err := connadmin.New(cl, connregistry.DefaultListAPIKey, 0).List(ctx, connregistry.Filter{}, false)
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			require.NotEmpty(t, res[0].Connections)
			for _, c := range res[0].Connections {
				assert.Equal(t, "User:alice", c.Principal)
				assert.Equal(t, "SASL_PLAINTEXT", c.ListenerName)
			}

			wrong, err := kgo.NewClient(kgo.SeedBrokers(addr), socketservertest.KgoSASL(mechanism, "alice", "not-her-password"),
				kgo.RequestRetries(0))
			require.NoError(t, err)
			defer wrong.Close()
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, wrong)
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "a wrong password is refused")
		})
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit after SIGTERM")
	case <-time.After(15 * time.Second):
		t.Fatal("the program did not exit within 15 s of SIGTERM")
	}
	assert.False(t, strings.Contains(logged.String(), "level=ERROR") || strings.Contains(logged.String(), "level=WARN"), logged.String())
}

// startEmbed starts the built program with args and returns it, the
// address it logs for the listener named listener, and what it logged up
// to that line (the rest of its standard error is discarded).
func startEmbed(t *testing.T, listener string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(buildEmbed(t), args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	logged := new(bytes.Buffer)
	lines := bufio.NewScanner(io.TeeReader(stderr, logged))
	listening := regexp.MustCompile(`msg=listening listener=` + regexp.QuoteMeta(listener) + ` addr=(\S+)`)
	addr := ""
	for addr == "" && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	require.NotEmpty(t, addr, "the program never logged its address: %s", logged.String())
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return cmd, addr, logged
}
