package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Namespace holds the reports.
const Namespace = "kubewin-system"

// DataKey is the ConfigMap key holding the report as JSON.
const DataKey = "report.json"

// ObjectName is the name of a node's report ConfigMap.
func ObjectName(node string) string { return "nodeboot-" + node }

// State is where a node's join stands.
type State string

// States of a report and of each phase.
const (
	StateRunning State = "Running"
	StateFailed  State = "Failed"
	StateDone    State = "Done"
)

// PhaseRecord is one join phase as nodeboot ran it.
type PhaseRecord struct {
	Name     string        `json:"name"`
	State    State         `json:"state"`
	Started  time.Time     `json:"started,omitzero"`
	Duration time.Duration `json:"durationNanos,omitempty"`
	Code     Code          `json:"code,omitempty"`
	Message  string        `json:"message,omitempty"`
}

// Report is a node's join status.
type Report struct {
	Node            string        `json:"node"`
	State           State         `json:"state"`
	Phase           string        `json:"phase,omitempty"`
	Code            Code          `json:"code,omitempty"`
	Message         string        `json:"message,omitempty"`
	Phases          []PhaseRecord `json:"phases"`
	NodebootVersion string        `json:"nodebootVersion"`
	Updated         time.Time     `json:"updated"`
}

// Failure returns a one-line description of a failed report: node, phase, code and message.
func (r *Report) Failure() string {
	return fmt.Sprintf("node %s failed in phase %s with code %s: %s", r.Node, r.Phase, r.Code, r.Message)
}

// ErrNotPrepared is returned when the node's report object does not exist: the provisioner did
// not prepare it (a node joined by hand), so there is nobody to report to.
var ErrNotPrepared = fmt.Errorf("report object %s/%s does not exist", Namespace, "nodeboot-<node>")

// Write stores r in the node's report object, which the provisioner created.
func Write(ctx context.Context, c kubernetes.Interface, r *Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// One JSON merge patch of the report's key (RFC 7386): a round trip, not a read and a write.
	// The object is the node's alone, so there is no concurrent writer to guard against.
	patch, err := json.Marshal(map[string]any{"data": map[string]string{DataKey: string(b)}})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().ConfigMaps(Namespace).Patch(ctx, ObjectName(r.Node), types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ErrNotPrepared
	case err != nil:
		return fmt.Errorf("write report object: %w", err)
	}
	return nil
}

// Read returns a node's report, or nil when the node has not reported yet.
func Read(ctx context.Context, c kubernetes.Interface, node string) (*Report, error) {
	cm, err := c.CoreV1().ConfigMaps(Namespace).Get(ctx, ObjectName(node), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, ok := cm.Data[DataKey]
	if !ok {
		return nil, nil
	}
	var r Report
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("decode report of node %s: %w", node, err)
	}
	return &r, nil
}

// ReportObject is a node's empty report object, labelled with its pool.
func ReportObject(poolLabel, pool, node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:      ObjectName(node),
		Namespace: Namespace,
		Labels:    map[string]string{poolLabel: pool},
	}}
}

// BundleLinePrefix starts the last line `nodeboot diagnose` prints when it wrote the bundle to
// a file, followed by the bundle's path on the node.
const BundleLinePrefix = "bundle: "

// ParseDiagnosis splits what `nodeboot diagnose` printed — the bundle's summary, the join
// report as a serial console line (SerialLine) when the node has one, and the bundle line —
// into the summary, the report (nil when there is none) and the bundle's path on the node
// (empty when the output has no bundle line: the bundle went to standard output, or nodeboot
// did not get that far).
func ParseDiagnosis(out string) (summary string, report *Report, bundle string) {
	var kept []string
	for _, line := range strings.Split(strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, BundleLinePrefix):
			bundle = strings.TrimPrefix(line, BundleLinePrefix)
		case strings.HasPrefix(line, SerialPrefix):
			report = LastSerialReport([]byte(line))
		default:
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n") + "\n", report, bundle
}

// SerialPrefix starts the line nodeboot writes to the machine's serial console with its report,
// at every change: clouds keep the serial console (Azure's boot diagnostics), so a provisioner
// can read a join that failed before it could reach the cluster.
const SerialPrefix = "kubewin-nodeboot-report: "

// SerialLine is a report as a serial console line.
func SerialLine(r *Report) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(SerialPrefix), b...), '\n'), nil
}

// LastSerialReport returns the last report in a serial console log, or nil.
func LastSerialReport(log []byte) *Report {
	lines := strings.Split(string(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimRight(lines[i], "\r")
		if !strings.HasPrefix(line, SerialPrefix) {
			continue
		}
		var r Report
		if json.Unmarshal([]byte(line[len(SerialPrefix):]), &r) == nil {
			return &r
		}
	}
	return nil
}
