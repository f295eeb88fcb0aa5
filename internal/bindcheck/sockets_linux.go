package bindcheck

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ephemeralPorts reads the kernel's ephemeral port range, from which port
// 0 is given.
func ephemeralPorts() (lo, hi uint16, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	l, err1 := strconv.ParseUint(f[0], 10, 16)
	h, err2 := strconv.ParseUint(f[1], 10, 16)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	return uint16(l), uint16(h), nil
}

// The sock_diag netlink interface (linux/sock_diag.h, linux/inet_diag.h).
const (
	sockDiagByFamily = 20
	tcpListen        = 10
	inetDiagReqLen   = 56 // struct inet_diag_req_v2
	inetDiagMsgLen   = 72 // struct inet_diag_msg
)

// listening returns the TCP sockets listening in this network namespace,
// as the kernel's sock_diag interface reports them: it filters by state,
// so a busy machine costs no more than its listeners.
func listening() ([]Socket, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer syscall.Close(fd)
	var socks []Socket
	for _, family := range []uint8{syscall.AF_INET, syscall.AF_INET6} {
		s, err := dump(fd, family)
		if err != nil {
			return nil, err
		}
		socks = append(socks, s...)
	}
	return socks, nil
}

func dump(fd int, family uint8) ([]Socket, error) {
	req := make([]byte, syscall.NLMSG_HDRLEN+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	body := req[syscall.NLMSG_HDRLEN:]
	body[0] = family
	body[1] = syscall.IPPROTO_TCP
	ne.PutUint32(body[4:], 1<<tcpListen)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	var socks []Socket
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return socks, nil
			case syscall.NLMSG_ERROR:
				return nil, fmt.Errorf("sock_diag: an error message")
			}
			if len(m.Data) < inetDiagMsgLen {
				continue
			}
			socks = append(socks, parseMsg(m.Data))
		}
	}
}

// parseMsg reads a struct inet_diag_msg: family, state, timer, retrans,
// then the socket id (ports big-endian, addresses in network order), and
// after it expires, rqueue, wqueue, uid and the inode.
func parseMsg(d []byte) Socket {
	port := binary.BigEndian.Uint16(d[4:6])
	var addr netip.Addr
	if d[0] == syscall.AF_INET {
		addr = netip.AddrFrom4([4]byte(d[8:12]))
	} else {
		addr = netip.AddrFrom16([16]byte(d[8:24]))
	}
	return Socket{Addr: netip.AddrPortFrom(addr, port), Inode: uint64(binary.NativeEndian.Uint32(d[68:72]))}
}

// socketOwners returns, for each of the inodes that process pid or one
// of its descendants holds, the process holding it. It reads pid's own
// descriptors first, and looks for descendants only for the inodes not
// found there.
func socketOwners(pid int, inodes []uint64) map[uint64]int {
	owners := map[uint64]int{}
	missing := func() bool {
		for _, ino := range inodes {
			if _, ok := owners[ino]; !ok {
				return true
			}
		}
		return false
	}
	readSockets(pid, owners)
	if !missing() {
		return owners
	}
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		p, err1 := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		pp, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			children[pp] = append(children[pp], p)
		}
	}
	for queue := children[pid]; len(queue) > 0 && missing(); queue = queue[1:] {
		readSockets(queue[0], owners)
		queue = append(queue, children[queue[0]]...)
	}
	return owners
}

// readSockets adds the inode of each socket process pid holds to owners.
func readSockets(pid int, owners map[uint64]int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		link, err := os.Readlink(dir + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 64); err == nil {
			owners[ino] = pid
		}
	}
}
