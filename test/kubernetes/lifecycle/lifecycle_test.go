package lifecycle

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// What a run plays (LIFECYCLE_ACTIONS and LIFECYCLE_LIFE change the first
// two): lives of lifeActions actions until totalActions are played, the
// life i on Configs[i%len(Configs)], with the API for the first
// len(Configs) of each 2·len(Configs) (LIFECYCLE_API=on or off skips the
// lives of the other mode, numbers kept).
const (
	totalActions  = 20000
	lifeActions   = 2000
	keptLivesGlob = "testdata/lives/*.json"
)

// TestLifecycleMatchesTheKubelet plays random pod lives on the kubelet's
// CPU manager and on the plugin over NRI, with the plugin watching the
// Kubernetes API and without, on every node configuration, and compares
// them after every action (the package comment says what). The lives
// kept in testdata/lives run first. The seed is new at each run and
// printed; LIFECYCLE_SEED=n plays seed n again; LIFECYCLE_KEEP=1 keeps a
// failing life in testdata/lives; LIFECYCLE_TRACE=1 prints both sides
// after every action.
func TestLifecycleMatchesTheKubelet(t *testing.T) {
	start := time.Now()
	if os.Getenv("LIFECYCLE_TRACE") != "" {
		Trace = t.Logf
	}
	total := Counts{}
	var mu sync.Mutex
	add := func(c Counts) {
		mu.Lock()
		total.Merge(c)
		mu.Unlock()
	}
	t.Run("kept", func(t *testing.T) {
		kept, err := filepath.Glob(keptLivesGlob)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range kept {
			life, err := LoadLife(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(filepath.Base(path), func(t *testing.T) { replay(t, life, add) })
		}
	})
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LIFECYCLE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LIFECYCLE_SEED=%q: %v", s, err)
		}
		seed = n
	}
	actions, err := envInt("LIFECYCLE_ACTIONS", totalActions)
	if err != nil {
		t.Fatal(err)
	}
	perLife, err := envInt("LIFECYCLE_LIFE", lifeActions)
	if err != nil {
		t.Fatal(err)
	}
	// (A life's number names the same life whatever the sizes, but it
	// exists only when the run is long enough.)
	sizes := ""
	if actions != totalActions {
		sizes += fmt.Sprintf("LIFECYCLE_ACTIONS=%d ", actions)
	}
	if perLife != lifeActions {
		sizes += fmt.Sprintf("LIFECYCLE_LIFE=%d ", perLife)
	}
	modes, err := apiModes(os.Getenv("LIFECYCLE_API"))
	if err != nil {
		t.Fatal(err)
	}
	if len(modes) == 1 {
		sizes += "LIFECYCLE_API=" + os.Getenv("LIFECYCLE_API") + " "
	}
	t.Logf("seed %d (%sLIFECYCLE_SEED=%d plays it again): %d actions in lives of %d", seed, sizes, seed, actions, perLife)
	t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
		for i, played := 0, 0; played < actions; i++ {
			cfg := Configs[i%len(Configs)]
			withAPI := (i/len(Configs))%2 == 0
			if !modes[withAPI] {
				continue // (the life keeps its number: a replay names it)
			}
			n := min(perLife, actions-played)
			played += n
			t.Run(fmt.Sprintf("life=%d/config=%s/api=%v", i, cfg.Name, withAPI), func(t *testing.T) {
				t.Parallel()
				generate(t, seed, i, cfg, withAPI, n, sizes, add)
			})
		}
	})
	t.Logf("seed %d, %s:\n%s", seed, time.Since(start).Round(time.Second), total.Table())
}

// apiModes reads LIFECYCLE_API: "on" plays only the lives in which the
// plugin watches the Kubernetes API, "off" only those without it, "" or
// "both" both.
func apiModes(s string) (map[bool]bool, error) {
	switch s {
	case "", "both":
		return map[bool]bool{true: true, false: true}, nil
	case "on":
		return map[bool]bool{true: true}, nil
	case "off":
		return map[bool]bool{false: true}, nil
	}
	return nil, fmt.Errorf("LIFECYCLE_API=%q: want on, off or both", s)
}

// envInt reads a positive count from the environment (def when unset).
func envInt(name string, def int) (int, error) {
	s := os.Getenv(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: not a positive count", name, s)
	}
	return n, nil
}

// generate plays a random life of n actions, life number i of seed on
// cfg, and keeps it when it fails and LIFECYCLE_KEEP is set; sizes are
// the run's size variables its replay needs.
func generate(t *testing.T, seed uint64, i int, cfg Config, withAPI bool, n int, sizes string, add func(Counts)) {
	o := newOracle(t, cfg, withAPI)
	defer func() { add(o.Counts) }()
	g := &generator{rng: rand.New(rand.NewPCG(seed, uint64(i))), smt: 1}
	if cfg.FullPCPUsOnly() {
		g.smt = o.kubelet.topo.CPUsPerCore()
	}
	life := &Life{Name: fmt.Sprintf("seed %d life %d", seed, i), API: withAPI, Config: cfg.Name}
	replay := fmt.Sprintf("%sLIFECYCLE_SEED=%d go test -run 'TestLifecycleMatchesTheKubelet/seed=%d/life=%d/' ./lifecycle/ (LIFECYCLE_TRACE=1 prints both sides after every action)",
		sizes, seed, seed, i)
	defer func() {
		// (A wait of the node that timed out failed the test at once.)
		if t.Failed() && len(life.Actions) > 0 {
			t.Logf("at step %d: %s\nreplay: %s", len(life.Actions)-1, life.Actions[len(life.Actions)-1], replay)
		}
	}()
	for step := 0; step < n; step++ {
		a := g.action(o.view())
		life.Actions = append(life.Actions, a)
		if err := o.Play(a); err != nil {
			keep(t, life)
			t.Fatalf("step %d: %s: %v", step, a, err)
		}
	}
}

// replay plays a kept life.
func replay(t *testing.T, life *Life, add func(Counts)) {
	cfg := Configs[0]
	if life.Config != "" {
		var err error
		if cfg, err = ConfigNamed(life.Config); err != nil {
			t.Fatal(err)
		}
	}
	o := newOracle(t, cfg, life.API)
	defer func() { add(o.Counts) }()
	for step, a := range life.Actions {
		if err := o.Play(a); err != nil {
			t.Fatalf("%s, step %d: %s: %v", life.Name, step, a, err)
		}
	}
}

// keep writes a failing life to testdata/lives when LIFECYCLE_KEEP is set.
func keep(t *testing.T, life *Life) {
	if os.Getenv("LIFECYCLE_KEEP") == "" {
		return
	}
	dir := filepath.Join("testdata", "lives")
	path := filepath.Join(dir, sanitize(fmt.Sprintf("%s-api-%v-%d-actions.json", life.Name, life.API, len(life.Actions))))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("keeping the life: %v", err)
		return
	}
	if err := life.Save(path); err != nil {
		t.Errorf("keeping the life: %v", err)
		return
	}
	t.Logf("kept as %s", path)
}

func sanitize(name string) string {
	out := []rune(name)
	for i, r := range out {
		if r == '=' || r == '/' || r == ' ' {
			out[i] = '-'
		}
	}
	return string(out)
}

// epoch is when the lives' clocks start.
var epoch = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// newOracle builds both sides of cfg.
func newOracle(t *testing.T, cfg Config, withAPI bool) *Oracle {
	m, err := placement.NewMachine(cfg.Machine)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := NewKubelet(cfg, m.Kubelet, m.Info)
	if err != nil {
		t.Fatal(err)
	}
	opts, tp, scope, err := cfg.pluginOptions()
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(m.Ours, opts, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clock := &Clock{now: epoch}
	pol, err := policy.New(alloc, policy.Options{Reserved: cfg.Reserved, InPlaceResize: true, Now: clock.Now,
		TopologyPolicy: tp, TopologyScope: scope})
	if err != nil {
		t.Fatal(err)
	}
	return NewOracle(t, cfg, m, kubelet, NewNode(t, pol, withAPI), clock)
}

// TestMain quiets the NRI runtime library's log (logrus' standard
// logger) and the kubelet's (klog), which would drown the comparison's
// own report.
func TestMain(m *testing.M) {
	logrus.StandardLogger().SetOutput(io.Discard)
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
