package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// auditEntryJSON is an entry of `curator audit -o json`.
type auditEntryJSON struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Serial  string `json:"serial"`
	Peer    string `json:"peer"`
	Call    string `json:"call"`
	Args    string `json:"args"`
	Target  string `json:"target"`
	Outcome string `json:"outcome"`
	Changes string `json:"changes"`
}

// TestOperatorRoles: operator certificates of each role, on a real
// cluster of three managers (the real binary): every management call of
// the service definition, called through a follower and through the
// leader with each role, is refused exactly when the role is below the
// call's (PermissionDenied naming both), and the refusals and the changes
// are in the audit trail, with no secret; a revoked certificate is refused
// by each manager within a second.
func TestOperatorRoles(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.176.")
	c.build(3, 0)
	clusterCA, err := pki.ReadCert(filepath.Join(filepath.Dir(c.config), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}

	// Issue one certificate of each role, as an operator would.
	certs := map[string]*tls.Certificate{}
	configs := map[string]string{}
	for _, role := range pki.OperatorRoles {
		dir := filepath.Join(t.TempDir(), role)
		out := mgmtRun(t, c, "cluster", "admin-cert", "--role", role, "--name", "who-"+role, "--ttl", "1h", "--out", dir)
		if !strings.Contains(out, "serial") {
			t.Errorf("admin-cert says %q, not the serial", out)
		}
		cert, key, err := pki.ReadFiles(dir, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := pki.OperatorRole(cert); err != nil || got != role {
			t.Fatalf("the %s certificate holds role %q (%v)", role, got, err)
		}
		tc := pki.TLSCertificate(cert, key)
		certs[role] = &tc
		configs[role] = filepath.Join(dir, "config.yaml")
	}
	var listed []struct {
		Name, Role, Serial string
		Revoked            bool
	}
	if err := mgmtJSON(t, c, &listed, "cluster", "certs", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 {
		t.Errorf("cluster certs lists %+v, want the three issued", listed)
	}

	info, err := mgmtClusterInfo(t, c)
	if err != nil {
		t.Fatal(err)
	}
	leaderID := info.Leader
	var leader, follower *node
	ids := mgmtIDs(t, c, "manager-1", "manager-2", "manager-3")
	for name, id := range ids {
		if id == leaderID {
			leader = c.nodes[name]
		} else if follower == nil {
			follower = c.nodes[name]
		}
	}
	if leader == nil || follower == nil {
		t.Fatalf("no leader (%s) or follower among %v", leaderID, ids)
	}

	// The matrix: role x every management call, from the service
	// definition, through a follower (forwarded) and the leader.
	svc := pb.File_curator_proto.Services().ByName("Management")
	ranks := map[string]int{}
	for i, r := range pki.OperatorRoles {
		ranks[r] = i
	}
	refusedCalls := map[string]bool{} // "who-ROLE Call"
	for _, via := range []*node{follower, leader} {
		for _, role := range pki.OperatorRoles {
			conn := grpcDial(t, via.listen, certs[role], clusterCA)
			for i := range svc.Methods().Len() {
				md := svc.Methods().Get(i)
				call := string(md.Name())
				need := spec.ManagementRole(call)
				if need == "" {
					t.Errorf("%s has no role", call)
					continue
				}
				err := callEmpty(t, conn, md)
				denied := status.Code(err) == codes.PermissionDenied
				if want := ranks[role] < ranks[need]; denied != want {
					t.Errorf("%s calling %s via %s: %v; want refused %v (needs %s)", role, call, via.listen, err, want, need)
				}
				if denied {
					msg := status.Convert(err).Message()
					if !strings.Contains(msg, "needs the "+need+" role") || !strings.Contains(msg, "holds "+role) {
						t.Errorf("the refusal of %s to %s does not name the role needed and held: %q", call, role, msg)
					}
					refusedCalls["who-"+role+" "+call] = true
				}
			}
		}
	}

	// What a group's machines run is an admin's decision, through a
	// follower as through the leader (the forwarded role reaches the
	// rule): an operator may change a group's version, not its binary
	// nor its environment, and a refusal names the field and the roles.
	gs, err := spec.ParseGroupSpec([]byte("name: web\nsize: 0\nroles: [worker]\nprovider: {process: {addresses: 127.0.176.50-127.0.176.59, dir: " + t.TempDir() + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	commitAs := func(role string, via *node, change func(*pb.GroupSpec)) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := proto.Clone(gs).(*pb.GroupSpec)
		change(s)
		_, err := pb.NewManagementClient(grpcDial(t, via.listen, certs[role], clusterCA)).CommitGroup(ctx, &pb.CommitGroupRequest{Spec: s})
		if err == nil {
			gs = s
		}
		return err
	}
	if err := commitAs(pki.OperatorOperator, leader, func(*pb.GroupSpec) {}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "a new group is an admin's decision") {
		t.Errorf("an operator's new group: %v", err)
	}
	if err := commitAs(pki.OperatorAdmin, follower, func(*pb.GroupSpec) {}); err != nil {
		t.Fatalf("the admin's new group: %v", err)
	}
	for _, via := range []*node{follower, leader} {
		for _, tc := range []struct {
			name   string
			change func(*pb.GroupSpec)
			field  string
		}{
			{"binary", func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = "/bin/sh" }, "provider.process.binary"},
			{"env", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"LD_PRELOAD": "/tmp/x.so"} }, "template.env.LD_PRELOAD"},
			{"version", func(s *pb.GroupSpec) { s.Template.Version += "+" }, ""},
		} {
			err := commitAs(pki.OperatorOperator, via, tc.change)
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("the operator's %s change via %s: %v", tc.name, via.listen, err)
			case tc.field != "" && (status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.field+" is an admin's decision") ||
				!strings.Contains(err.Error(), "needs the admin role") || !strings.Contains(err.Error(), "holds operator")):
				t.Errorf("the operator's %s change via %s: %v; want PermissionDenied naming %s and the roles", tc.name, via.listen, err, tc.field)
			}
		}
	}
	if err := commitAs(pki.OperatorAdmin, follower, func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"TZ": "UTC"} }); err != nil {
		t.Errorf("the admin's env change: %v", err)
	}

	// A reader's CLI reads, and is told what it may not do.
	if _, err := nodeLs(t, configs[pki.OperatorReader]); err != nil {
		t.Errorf("node ls with a reader certificate: %v", err)
	}
	if _, stderr, err := cli(t, "--config", configs[pki.OperatorReader], "token", "show", "worker"); err == nil ||
		!strings.Contains(stderr, "not allowed with this certificate") || !strings.Contains(stderr, "needs the admin role") {
		t.Errorf("token show with a reader certificate: %v, %q; want a refusal naming the admin role", err, stderr)
	}
	// curator ui with a reader certificate reads everything it shows, and
	// says whom it reads as.
	const uiAddr = "127.0.176.2:8080"
	var uiOut syncBuffer
	start(t, "ui", filepath.Join(t.TempDir(), "ui.log"), &uiOut, "--config", configs[pki.OperatorReader], "ui", "--listen", uiAddr)
	testenv.Eventually(t, 30*time.Second, "curator ui with a reader certificate shows the cluster without errors", func() error {
		body, err := httpGetOK("http://" + uiAddr + "/api/state")
		if err != nil {
			return err
		}
		var st struct {
			Cluster  *struct{} `json:"cluster"`
			Nodes    []struct{}
			Groups   []struct{}
			Errors   map[string]string
			Operator *struct{ Name, Role, May string }
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return err
		}
		if len(st.Errors) > 0 || st.Cluster == nil || len(st.Nodes) != 3 {
			return fmt.Errorf("state: cluster %v, %d nodes, errors %v", st.Cluster != nil, len(st.Nodes), st.Errors)
		}
		if st.Operator == nil || st.Operator.Name != "who-reader" || st.Operator.Role != pki.OperatorReader || !strings.Contains(st.Operator.May, "read only") {
			return fmt.Errorf("operator %+v; want who-reader, reader, read only", st.Operator)
		}
		return nil
	})
	// audit --follow, started before the change, prints it as it comes.
	var followOut syncBuffer
	follow := start(t, "audit --follow", filepath.Join(t.TempDir(), "follow.log"), &followOut,
		"--config", configs[pki.OperatorReader], "audit", "--follow", "-o", "json", "--call", "UpdateNode", "--limit", "1")
	// An operator changes the fleet; the change is audited.
	mgmtRunWith(t, configs[pki.OperatorOperator], "node", "update", "--label-add", "rack=r1", "manager-3")
	testenv.Eventually(t, 10*time.Second, "audit --follow prints the update", func() error {
		if !strings.Contains(followOut.String(), `"target":"manager-3"`) {
			return fmt.Errorf("audit --follow printed %q", followOut.String())
		}
		return nil
	})
	// A second change, made while it runs, comes by its polling.
	mgmtRunWith(t, configs[pki.OperatorOperator], "node", "update", "--label-add", "rack=r2", "manager-3")
	testenv.Eventually(t, 10*time.Second, "audit --follow prints the second update", func() error {
		if strings.Count(followOut.String(), `"target":"manager-3"`) < 2 {
			return fmt.Errorf("audit --follow printed %q", followOut.String())
		}
		return nil
	})
	if err := follow.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := follow.wait(t, 10*time.Second); err != nil {
		t.Errorf("audit --follow after Ctrl-C: %v", err)
	}
	// An admin's secrets stay out of the trail.
	workerToken := mgmtRun(t, c, "token", "rotate", "worker")
	backup := filepath.Join(t.TempDir(), "backup.db")
	mgmtRun(t, c, "cluster", "backup", backup)

	// Revocation: each manager refuses the operator certificate within a
	// second of the revoke's answer.
	mgmtRun(t, c, "cluster", "revoke-cert", "who-operator")
	revoked := time.Now()
	for _, name := range []string{"manager-1", "manager-2", "manager-3"} {
		conn := grpcDial(t, c.nodes[name].listen, certs[pki.OperatorOperator], clusterCA)
		testenv.Eventually(t, time.Second-time.Since(revoked), name+" refuses the revoked certificate", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := pb.NewManagementClient(conn).ListNodes(ctx, &pb.ListNodesRequest{})
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "revoked") {
				return err
			}
			return nil
		})
	}
	if err := mgmtJSON(t, c, &listed, "cluster", "certs", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if l.Revoked != (l.Name == "who-operator") {
			t.Errorf("cluster certs after revoking who-operator: %+v", l)
		}
	}

	// The audit trail.
	var trail []auditEntryJSON
	out := mgmtRun(t, c, "audit", "--limit", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &trail); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, e := range trail {
		if strings.HasPrefix(e.Outcome, "PermissionDenied") {
			found[e.Name+" "+e.Call] = true
		}
		if e.Peer == "" || e.Serial == "" {
			t.Errorf("an audit entry without its caller's address or serial: %+v", e)
		}
	}
	// Every call above a reader's, as the matrix made it with the admin
	// certificate (an empty request, mostly refused as invalid), is in
	// the trail: read from the service definition, so none is left out.
	made := map[string]bool{}
	for _, e := range trail {
		if e.Name == "who-admin" {
			made[e.Call] = true
		}
	}
	for i := range svc.Methods().Len() {
		call := string(svc.Methods().Get(i).Name())
		if need := spec.ManagementRole(call); need != pki.OperatorReader && !made[call] {
			t.Errorf("the admin's %s is not in the audit trail", call)
		}
	}
	for k := range refusedCalls {
		if !found[k] {
			t.Errorf("the refusal %q is not in the audit trail", k)
		}
	}
	for _, want := range []auditEntryJSON{
		{Name: "who-operator", Role: "operator", Call: "UpdateNode", Target: "manager-3", Outcome: "ok"},
		{Name: "admin", Role: "admin", Call: "RotateToken", Target: "worker", Outcome: "ok"},
		{Name: "admin", Role: "admin", Call: "Backup", Outcome: "ok"},
		{Name: "admin", Role: "admin", Call: "RevokeAdminCertificate", Target: "who-operator", Outcome: "ok"},
		{Name: "admin", Role: "admin", Call: "RenewAdminCertificate", Target: "who-reader", Outcome: "ok"},
	} {
		ok := false
		for _, e := range trail {
			if e.Name == want.Name && e.Role == want.Role && e.Call == want.Call && e.Target == want.Target && e.Outcome == want.Outcome {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no audit entry %+v", want)
		}
	}
	for what, secret := range map[string]string{
		"the worker token":      strings.TrimSpace(workerToken),
		"a token's secret":      tokenSecret(t, strings.TrimSpace(workerToken)),
		"a private key":         "PRIVATE KEY",
		"a certificate":         "CERTIFICATE",
		"a piece of the backup": backupPiece(t, backup),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("the audit trail shows %s", what)
		}
	}
	// The operator's change is an event too, with its actor, and its
	// node by ID and name.
	var events []struct {
		Loop, Action, Actor string
		NodeID              string `json:"node_id"`
		NodeName            string `json:"node_name"`
	}
	if err := mgmtJSON(t, c, &events, "events", "--limit", "0", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, e := range events {
		if e.Loop == "operator" && e.Action == "UpdateNode" {
			seen = true
			if e.Actor != "who-operator (operator)" || e.NodeID != ids["manager-3"] || e.NodeName != "manager-3" {
				t.Errorf("the operator's event: %+v; want actor who-operator (operator) on manager-3 (%s)", e, ids["manager-3"])
			}
		}
		if e.Action == "Backup" || e.Action == "GetToken" {
			t.Errorf("a call that changes nothing is an event: %+v", e)
		}
	}
	if !seen {
		t.Errorf("no operator event for the UpdateNode in %+v", events)
	}
	out = mgmtRun(t, c, "events", "--limit", "0")
	if !strings.Contains(out, "ACTOR") || !strings.Contains(out, "who-operator (operator)") {
		t.Errorf("events does not show the actor:\n%s", out)
	}
	// --node selects by the name typed or the ID it resolved to.
	var byNode []auditEntryJSON
	if err := json.Unmarshal([]byte(mgmtRun(t, c, "audit", "--node", ids["manager-3"][:8], "-o", "json")), &byNode); err != nil {
		t.Fatal(err)
	}
	if len(byNode) == 0 || byNode[len(byNode)-1].Call != "UpdateNode" {
		t.Errorf("audit --node %s: %+v, want the update", ids["manager-3"][:8], byNode)
	}
	// --who and --call select.
	out = mgmtRun(t, c, "audit", "--who", "who-operator", "--call", "UpdateNode", "-o", "json")
	trail = nil
	if err := json.Unmarshal([]byte(out), &trail); err != nil {
		t.Fatal(err)
	}
	// The matrix's empty requests are there too, refused as invalid.
	if len(trail) == 0 || trail[len(trail)-1].Outcome != "ok" || trail[len(trail)-1].Target != "manager-3" {
		t.Errorf("audit --who who-operator --call UpdateNode: %+v, want the update last", trail)
	}
	for _, e := range trail {
		if e.Name != "who-operator" || e.Call != "UpdateNode" {
			t.Errorf("audit --who who-operator --call UpdateNode shows %+v", e)
		}
	}
}

// callEmpty calls md with an empty request and returns the first error
// (nil when the call answered or streamed).
func callEmpty(t *testing.T, conn *grpc.ClientConn, md protoreflect.MethodDescriptor) error {
	t.Helper()
	in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	method := "/curator.v1.Management/" + string(md.Name())
	if !md.IsStreamingServer() {
		return conn.Invoke(ctx, method, in.New().Interface(), out.New().Interface())
	}
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(in.New().Interface()); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	return cs.RecvMsg(out.New().Interface())
}

// backupPiece is 32 bytes from the middle of a backup file, as text.
func backupPiece(t *testing.T, path string) string {
	t.Helper()
	data := readFile(t, path)
	// A piece of binary from the second half: not padding, and not text
	// a log could hold for another reason (an etcd backup holds the
	// cluster's names and keys as text too).
	for i := len(data) / 2; i+32 <= len(data); i++ {
		piece := data[i : i+32]
		distinct := map[byte]bool{}
		binary := false
		for _, b := range []byte(piece) {
			distinct[b] = true
			binary = binary || b < 0x20 || b > 0x7e
		}
		if len(distinct) >= 16 && binary {
			return piece
		}
	}
	t.Fatalf("backup %s (%d bytes) holds no binary piece of 32 bytes in its second half", path, len(data))
	return ""
}

// mgmtRunWith runs an operator command with the client config at config.
func mgmtRunWith(t *testing.T, config string, args ...string) string {
	t.Helper()
	out, stderr, err := cli(t, append([]string{"--config", config}, args...)...)
	if err != nil {
		t.Fatalf("curator %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return out
}
