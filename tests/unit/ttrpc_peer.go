// ttrpc_peer.go - the Go end of test_ttrpc_go.c: containerd's own ttrpc
// package (Debian's golang-github-containerd-ttrpc-dev) as a client of the C
// server, and as the server the C client calls. tests/unit/meson.build builds
// it in GOPATH mode, offline. The messages are written here by hand from
// containerd's .proto files (field numbers and types), not from ours.
//
// Usage:
//
//	ttrpc-go-peer client SOCKET
//	ttrpc-go-peer serve SOCKET
//
// client runs the scenarios against a C server on SOCKET, printing a line
// "ok NAME" for each, and exits 1 with "FAIL NAME: why" at the first failure.
// serve answers containerd's Events.Forward on SOCKET: it prints "ready",
// then a line for each call, until its stdin ends.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/gogo/protobuf/proto"
	"github.com/gogo/protobuf/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Embedded, it makes a struct of tagged fields a proto.Message, as ttrpc's
// own Request is one: gogo marshals it by reflection on the tags. Its field
// is named as generated code names its empty field, XXX_NoUnkeyedLiteral,
// which gogo's reflection skips.
type XXX_NoUnkeyedLiteral struct{}

func (*XXX_NoUnkeyedLiteral) Reset()         {}
func (*XXX_NoUnkeyedLiteral) String() string { return "" }
func (*XXX_NoUnkeyedLiteral) ProtoMessage()  {}

// containerd v1.6.20 runtime/v2/task/shim.proto
type ConnectRequest struct {
	XXX_NoUnkeyedLiteral
	ID string `protobuf:"bytes,1,opt,name=id,proto3"`
}
type ConnectResponse struct {
	XXX_NoUnkeyedLiteral
	ShimPid uint32 `protobuf:"varint,1,opt,name=shim_pid,proto3"`
	TaskPid uint32 `protobuf:"varint,2,opt,name=task_pid,proto3"`
	Version string `protobuf:"bytes,3,opt,name=version,proto3"`
}
type StateRequest struct {
	XXX_NoUnkeyedLiteral
	ID     string `protobuf:"bytes,1,opt,name=id,proto3"`
	ExecID string `protobuf:"bytes,2,opt,name=exec_id,proto3"`
}
type StateResponse struct {
	XXX_NoUnkeyedLiteral
	ID         string           `protobuf:"bytes,1,opt,name=id,proto3"`
	Bundle     string           `protobuf:"bytes,2,opt,name=bundle,proto3"`
	Pid        uint32           `protobuf:"varint,3,opt,name=pid,proto3"`
	Status     int32            `protobuf:"varint,4,opt,name=status,proto3"`
	Stdin      string           `protobuf:"bytes,5,opt,name=stdin,proto3"`
	Stdout     string           `protobuf:"bytes,6,opt,name=stdout,proto3"`
	Stderr     string           `protobuf:"bytes,7,opt,name=stderr,proto3"`
	Terminal   bool             `protobuf:"varint,8,opt,name=terminal,proto3"`
	ExitStatus uint32           `protobuf:"varint,9,opt,name=exit_status,proto3"`
	ExitedAt   *types.Timestamp `protobuf:"bytes,10,opt,name=exited_at,proto3"`
	ExecID     string           `protobuf:"bytes,11,opt,name=exec_id,proto3"`
}
type StartRequest = StateRequest // id = 1, exec_id = 2, as WaitRequest and DeleteRequest
type StartResponse struct {
	XXX_NoUnkeyedLiteral
	Pid uint32 `protobuf:"varint,1,opt,name=pid,proto3"`
}
type WaitResponse struct {
	XXX_NoUnkeyedLiteral
	ExitStatus uint32           `protobuf:"varint,1,opt,name=exit_status,proto3"`
	ExitedAt   *types.Timestamp `protobuf:"bytes,2,opt,name=exited_at,proto3"`
}
type KillRequest struct {
	XXX_NoUnkeyedLiteral
	ID     string `protobuf:"bytes,1,opt,name=id,proto3"`
	ExecID string `protobuf:"bytes,2,opt,name=exec_id,proto3"`
	Signal uint32 `protobuf:"varint,3,opt,name=signal,proto3"`
	All    bool   `protobuf:"varint,4,opt,name=all,proto3"`
}
type PidsResponse struct {
	XXX_NoUnkeyedLiteral
	Processes []*ProcessInfo `protobuf:"bytes,1,rep,name=processes,proto3"`
}
type ProcessInfo struct {
	XXX_NoUnkeyedLiteral
	Pid  uint32     `protobuf:"varint,1,opt,name=pid,proto3"`
	Info *types.Any `protobuf:"bytes,2,opt,name=info,proto3"`
}
type StatsResponse struct {
	XXX_NoUnkeyedLiteral
	Stats *types.Any `protobuf:"bytes,1,opt,name=stats,proto3"`
}

// containerd/cgroups v2/stats/metrics.proto, the part checked here
type Metrics struct {
	XXX_NoUnkeyedLiteral
	Pids   *PidsStat   `protobuf:"bytes,1,opt,name=pids,proto3"`
	Memory *MemoryStat `protobuf:"bytes,4,opt,name=memory,proto3"`
}
type PidsStat struct {
	XXX_NoUnkeyedLiteral
	Current uint64 `protobuf:"varint,1,opt,name=current,proto3"`
	Limit   uint64 `protobuf:"varint,2,opt,name=limit,proto3"`
}
type MemoryStat struct {
	XXX_NoUnkeyedLiteral
	Usage      uint64 `protobuf:"varint,32,opt,name=usage,proto3"`
	UsageLimit uint64 `protobuf:"varint,33,opt,name=usage_limit,proto3"`
}

// A test service of the C server's: bytes back as they came.
type Blob struct {
	XXX_NoUnkeyedLiteral
	Data []byte `protobuf:"bytes,1,opt,name=data,proto3"`
}

// containerd v1.6.20 api/services/ttrpc/events/v1/events.proto, api/events/task.proto
type ForwardRequest struct {
	XXX_NoUnkeyedLiteral
	Envelope *Envelope `protobuf:"bytes,1,opt,name=envelope,proto3"`
}
type Envelope struct {
	XXX_NoUnkeyedLiteral
	Timestamp *types.Timestamp `protobuf:"bytes,1,opt,name=timestamp,proto3"`
	Namespace string           `protobuf:"bytes,2,opt,name=namespace,proto3"`
	Topic     string           `protobuf:"bytes,3,opt,name=topic,proto3"`
	Event     *types.Any       `protobuf:"bytes,4,opt,name=event,proto3"`
}
type TaskExit struct {
	XXX_NoUnkeyedLiteral
	ContainerID string           `protobuf:"bytes,1,opt,name=container_id,proto3"`
	ID          string           `protobuf:"bytes,2,opt,name=id,proto3"`
	Pid         uint32           `protobuf:"varint,3,opt,name=pid,proto3"`
	ExitStatus  uint32           `protobuf:"varint,4,opt,name=exit_status,proto3"`
	ExitedAt    *types.Timestamp `protobuf:"bytes,5,opt,name=exited_at,proto3"`
}

const task = "containerd.task.v2.Task"

func dial(path string) *ttrpc.Client {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fail("dial", err)
	}
	return ttrpc.NewClient(conn)
}

func fail(name string, err interface{}) {
	fmt.Printf("FAIL %s: %v\n", name, err)
	os.Exit(1)
}

func check(name string, ok bool, format string, args ...interface{}) {
	if !ok {
		fail(name, fmt.Sprintf(format, args...))
	}
}

func ctx5() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// wantCode: err is a status with code c.
func wantCode(name string, err error, c codes.Code) {
	check(name, status.Code(err) == c, "want %v, got %v", c, err)
}

func client(path string) {
	c1, c2 := dial(path), dial(path)
	defer c1.Close()
	defer c2.Close()
	ctx, cancel := ctx5()
	defer cancel()

	var conn ConnectResponse
	if err := c1.Call(ctx, task, "Connect", &ConnectRequest{ID: "c1"}, &conn); err != nil {
		fail("connect", err)
	}
	check("connect", conn.TaskPid == 42 && conn.Version == "mayfly-test" && conn.ShimPid > 1,
		"got %+v", conn)
	fmt.Println("ok connect")

	// The namespace goes as containerd's context puts it, with a deadline.
	nsctx := ttrpc.WithMetadata(ctx, ttrpc.MD{"containerd-namespace-ttrpc": []string{"k8s.io"}})
	var st StateResponse
	if err := c1.Call(nsctx, task, "State", &StateRequest{ID: "c1", ExecID: "e1"}, &st); err != nil {
		fail("state", err)
	}
	check("state", st.ID == "c1" && st.ExecID == "e1" && st.Bundle == "ns=k8s.io deadline=1" &&
		st.Pid == 4242 && st.Status == 2 && st.Terminal && st.ExitedAt != nil &&
		st.ExitedAt.Seconds == 1767225600, "got %+v", st)
	fmt.Println("ok state with metadata and deadline")

	err := c1.Call(ctx, task, "Delete", &StartRequest{ID: "missing"}, &StateResponse{})
	wantCode("error", err, codes.NotFound)
	check("error", status.Convert(err).Message() == "container missing: not found", "got %v", err)
	fmt.Println("ok error status")

	wantCode("unimplemented", c1.Call(ctx, task, "Frobnicate", &StartRequest{}, &types.Empty{}),
		codes.Unimplemented)
	wantCode("unimplemented", c1.Call(ctx, "containerd.task.v3.Task", "State", &StartRequest{},
		&StateResponse{}), codes.Unimplemented)
	fmt.Println("ok unimplemented")

	// Wait parks on the first connection until Kill; Start answers meanwhile,
	// on it and on the second.
	waited := make(chan error, 1)
	var wr WaitResponse
	go func() { waited <- c1.Call(ctx, task, "Wait", &StartRequest{ID: "c1"}, &wr) }()
	for i := 0; ; i++ {
		var pids PidsResponse
		if err := c2.Call(ctx, task, "Pids", &StartRequest{ID: "c1"}, &pids); err != nil {
			fail("parked", err)
		}
		if len(pids.Processes) == 1 { // Pids counts the parked Waits
			break
		}
		check("parked", i < 500, "Wait never parked")
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []*ttrpc.Client{c1, c2} {
		var sr StartResponse
		t0 := time.Now()
		if err := c.Call(ctx, task, "Start", &StartRequest{ID: "c1"}, &sr); err != nil {
			fail("parked", err)
		}
		check("parked", sr.Pid == 4242 && time.Since(t0) < 2*time.Second, "start: %+v", sr)
	}
	select {
	case err := <-waited:
		fail("parked", fmt.Sprintf("Wait returned before Kill: %v", err))
	default:
	}
	if err := c2.Call(ctx, task, "Kill", &KillRequest{ID: "c1", Signal: 9}, &types.Empty{}); err != nil {
		fail("parked", err)
	}
	if err := <-waited; err != nil {
		fail("parked", err)
	}
	check("parked", wr.ExitStatus == 137 && wr.ExitedAt != nil, "wait: %+v", wr)
	fmt.Println("ok a parked Wait blocks neither Start nor Kill, on one connection or two")

	// Calls side by side on one connection: each answer on its own stream.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var sr StartResponse
			if err := c1.Call(ctx, task, "Start", &StartRequest{ID: fmt.Sprint("p", i)}, &sr); err != nil {
				errs <- err
			} else if sr.Pid != uint32(1000+i) {
				errs <- fmt.Errorf("p%d got pid %d", i, sr.Pid)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fail("concurrent", err)
	}
	fmt.Println("ok 64 concurrent calls")

	var sr StatsResponse
	if err := c2.Call(ctx, task, "Stats", &StartRequest{ID: "c1"}, &sr); err != nil {
		fail("stats", err)
	}
	var m Metrics
	check("stats", sr.Stats != nil && sr.Stats.TypeUrl == "io.containerd.cgroups.v2.Metrics",
		"got %+v", sr.Stats)
	if err := proto.Unmarshal(sr.Stats.Value, &m); err != nil {
		fail("stats", err)
	}
	check("stats", m.Pids != nil && m.Pids.Current == 3 && m.Memory != nil &&
		m.Memory.Usage == 5242880, "got %+v %+v", m.Pids, m.Memory)
	fmt.Println("ok stats as cgroups v2 metrics")

	big := bytes.Repeat([]byte("mayfly"), 3<<20/6)
	var back Blob
	if err := c2.Call(ctx, "mayfly.test.v1.Echo", "Echo", &Blob{Data: big}, &back); err != nil {
		fail("big", err)
	}
	check("big", bytes.Equal(back.Data, big), "%d bytes back of %d", len(back.Data), len(big))
	fmt.Println("ok 3 MiB each way")

	// Over 4 MiB: refused (RESOURCE_EXHAUSTED, or the connection is gone by
	// the time the Go client looks); the server serves the next one.
	c3 := dial(path)
	err = c3.Call(ctx, "mayfly.test.v1.Echo", "Echo", &Blob{Data: make([]byte, 5<<20)}, &back)
	check("oversized", err != nil, "a 5 MiB request was served")
	c3.Close()
	c4 := dial(path)
	if err := c4.Call(ctx, task, "Connect", &ConnectRequest{ID: "c1"}, &conn); err != nil {
		fail("oversized", err)
	}
	c4.Close()
	fmt.Printf("ok over 4 MiB refused (%v)\n", status.Code(err))
}

func serve(path string) {
	s, err := ttrpc.NewServer()
	if err != nil {
		fail("serve", err)
	}
	var out sync.Mutex
	s.Register("containerd.services.events.ttrpc.v1.Events", map[string]ttrpc.Method{
		"Forward": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			var req ForwardRequest
			if err := unmarshal(&req); err != nil {
				return nil, err
			}
			e := req.Envelope
			if e == nil || e.Timestamp == nil || e.Event == nil {
				return nil, status.Errorf(codes.InvalidArgument, "an envelope without its parts")
			}
			var ex TaskExit
			if err := proto.Unmarshal(e.Event.Value, &ex); err != nil {
				return nil, err
			}
			md, _ := ttrpc.GetMetadata(ctx)
			_, dl := ctx.Deadline()
			out.Lock()
			fmt.Printf("forward ns=%s md-ns=%v deadline=%v topic=%s type=%s ts=%d.%09d exit=%s/%s/%d/%d\n",
				e.Namespace, md["containerd-namespace-ttrpc"], dl, e.Topic, e.Event.TypeUrl,
				e.Timestamp.Seconds, e.Timestamp.Nanos, ex.ContainerID, ex.ID, ex.Pid, ex.ExitStatus)
			out.Unlock()
			switch e.Topic {
			case "/fail":
				return nil, status.Errorf(codes.FailedPrecondition, "refused %s", e.Topic)
			case "/slow":
				time.Sleep(2 * time.Second)
			}
			return &types.Empty{}, nil
		},
	})
	l, err := net.Listen("unix", path)
	if err != nil {
		fail("serve", err)
	}
	go s.Serve(context.Background(), l)
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	s.Close()
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: ttrpc-go-peer client|serve SOCKET")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "client":
		client(os.Args[2])
	case "serve":
		serve(os.Args[2])
	default:
		os.Exit(2)
	}
}
