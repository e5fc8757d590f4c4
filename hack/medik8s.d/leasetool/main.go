// leasetool drives the node lease of github.com/medik8s/common/pkg/lease, the library that
// Node Health Check, Self Node Remediation and the Node Maintenance Operator use, so the
// tests can stand for them against the local cluster. One JSON line on stdout:
//
//	{"ok":true,"action":"request","node":"n1","holder":"NodeHealthCheck-x","lease":{...}}
//	{"ok":false,"action":"request",...,"error":"...","alreadyHeld":true,"lease":{...}}
//
// Usage:
//
//	leasetool [--kubeconfig FILE] request    --node N --holder H [--duration 3600s]
//	leasetool [--kubeconfig FILE] invalidate --node N --holder H
//	leasetool [--kubeconfig FILE] get        --node N [--holder H]
//
// The library reads the lease namespace from LEASE_NAMESPACE (default medik8s-leases);
// leasetool clears that variable unless --namespace is given, so the lease is where NHC
// puts it. Its diagnostics (logrus, logr) go to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/medik8s/common/pkg/lease"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

type leaseOut struct {
	Namespace            string   `json:"namespace"`
	Name                 string   `json:"name"`
	ResourceVersion      string   `json:"resourceVersion"`
	HolderIdentity       *string  `json:"holderIdentity"`
	LeaseDurationSeconds *int32   `json:"leaseDurationSeconds"`
	AcquireTime          *string  `json:"acquireTime"`
	RenewTime            *string  `json:"renewTime"`
	LeaseTransitions     *int32   `json:"leaseTransitions"`
	OwnerReferences      []string `json:"ownerReferences"`
	// ValidNow applies the library's own rule (isValidLease: renewTime not in the
	// future and renewTime+duration not in the past) with this process's clock.
	ValidNow bool `json:"validNow"`
}

type result struct {
	OK          bool      `json:"ok"`
	Action      string    `json:"action"`
	Node        string    `json:"node"`
	Holder      string    `json:"holder,omitempty"`
	Namespace   string    `json:"namespace"`
	Error       string    `json:"error,omitempty"`
	AlreadyHeld bool      `json:"alreadyHeld,omitempty"`
	NotFound    bool      `json:"notFound,omitempty"`
	Lease       *leaseOut `json:"lease,omitempty"`
	Now         string    `json:"now"`
}

func emit(r result, code int) {
	r.Now = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	os.Exit(code)
}

func fmtTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func describe(l *coordv1.Lease) *leaseOut {
	if l == nil {
		return nil
	}
	o := &leaseOut{
		Namespace: l.Namespace, Name: l.Name, ResourceVersion: l.ResourceVersion,
		HolderIdentity: l.Spec.HolderIdentity, LeaseDurationSeconds: l.Spec.LeaseDurationSeconds,
		LeaseTransitions: l.Spec.LeaseTransitions, OwnerReferences: []string{},
	}
	if l.Spec.AcquireTime != nil {
		o.AcquireTime = fmtTime(&l.Spec.AcquireTime.Time)
	}
	if l.Spec.RenewTime != nil {
		o.RenewTime = fmtTime(&l.Spec.RenewTime.Time)
	}
	for _, r := range l.OwnerReferences {
		o.OwnerReferences = append(o.OwnerReferences, fmt.Sprintf("%s/%s/%s/%s", r.APIVersion, r.Kind, r.Name, r.UID))
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		now := time.Now()
		renew := l.Spec.RenewTime.Time
		due := renew.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		o.ValidNow = !due.Before(now) && !renew.After(now)
	}
	return o
}

// parseDuration takes "3600", "3600s" or any Go duration ("1h").
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: leasetool [--kubeconfig FILE] request|invalidate|get --node N --holder H [--duration 3600s] [--namespace NS]")
		os.Exit(2)
	}
	// Global flags may come before the subcommand; the rest after it.
	args := os.Args[1:]
	var action string
	var rest []string
	valueFlags := map[string]bool{"kubeconfig": true, "node": true, "holder": true, "duration": true,
		"namespace": true, "timeout": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if valueFlags[strings.TrimLeft(a, "-")] {
				i++ // its value
			}
			continue
		}
		action = a
		rest = append(append(rest, args[:i]...), args[i+1:]...)
		break
	}
	fs := flag.NewFlagSet("leasetool", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig (default $KUBECONFIG)")
	node := fs.String("node", "", "node name")
	holder := fs.String("holder", "", "holder identity, e.g. NodeHealthCheck-x or node-maintenance")
	durationArg := fs.String("duration", "3600s", "lease duration (seconds or a Go duration)")
	namespace := fs.String("namespace", "", "lease namespace (sets LEASE_NAMESPACE; default: the library's medik8s-leases)")
	timeout := fs.Duration("timeout", 30*time.Second, "overall timeout")
	if err := fs.Parse(rest); err != nil {
		os.Exit(2)
	}
	r := result{Action: action, Node: *node, Holder: *holder}
	fail := func(code int, format string, a ...any) {
		r.Error = fmt.Sprintf(format, a...)
		emit(r, code)
	}
	switch action {
	case "request", "invalidate", "get":
	default:
		fail(2, "unknown action %q: want request, invalidate or get", action)
	}
	if *node == "" {
		fail(2, "--node is required")
	}
	if *holder == "" && action != "get" {
		fail(2, "--holder is required for %s", action)
	}
	duration, err := parseDuration(*durationArg)
	if err != nil || duration <= 0 {
		fail(2, "bad --duration %q", *durationArg)
	}
	if *namespace != "" {
		os.Setenv(lease.NSEnvVar, *namespace)
	} else {
		os.Unsetenv(lease.NSEnvVar)
	}
	r.Namespace = "medik8s-leases"
	if *namespace != "" {
		r.Namespace = *namespace
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if *kubeconfig != "" {
		rules.ExplicitPath = *kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fail(1, "kubeconfig: %v", err)
	}
	cfg.UserAgent = "medik8s-leasetool"
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail(1, "scheme: %v", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fail(1, "client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	// The owner reference carries the node's UID, as NHC's and NMO's do.
	n := &corev1.Node{}
	if err := cl.Get(ctx, types.NamespacedName{Name: *node}, n); err != nil {
		r.NotFound = apierrors.IsNotFound(err)
		fail(1, "node %s: %v", *node, err)
	}
	holderID := *holder
	if holderID == "" {
		holderID = "leasetool-get"
	}
	m, err := lease.NewManager(cl, holderID)
	if err != nil {
		fail(1, "lease manager: %v", err)
	}
	current := func() *leaseOut {
		l, err := m.GetLease(ctx, n)
		if err != nil {
			return nil
		}
		return describe(l)
	}
	switch action {
	case "request":
		err = m.RequestLease(ctx, n, duration)
	case "invalidate":
		err = m.InvalidateLease(ctx, n)
	case "get":
		var l *coordv1.Lease
		l, err = m.GetLease(ctx, n)
		if err == nil {
			r.Lease = describe(l)
		}
	}
	if err != nil {
		var held lease.AlreadyHeldError
		r.AlreadyHeld = errors.As(err, &held)
		r.NotFound = apierrors.IsNotFound(err)
		r.Lease = current()
		fail(1, "%v", err)
	}
	if action != "get" {
		r.Lease = current()
	}
	r.OK = true
	emit(r, 0)
}
