// Command porcupine-driver checks one Wrack history file (JSON Lines, docs/ARCHITECTURE.md
// "History") against a keyed cas-register with Porcupine, for bench/linearizable.py's
// side-by-side figures. It is built by that script in a temp dir against the Porcupine
// sources in ../shared/data/porcupine-src (a go.mod `replace`); nothing of Porcupine is
// copied here, this file only calls its public API (Model, Operation, CheckOperationsTimeout).
//
// Encoding, the same as Wrack's cas-register model (docs/checkers-linearizable.md):
// read ok [k, v]; write [k, v] ok or info; cas [k, [old, new]] ok, fail (the value was not
// old) or info. Failed and indeterminate reads, failed writes and failed cas ops carrying
// an "error" are dropped. An indeterminate op (info, or never completed) returns at
// +infinity, Porcupine's way of letting it take effect at any point after its call, or
// never (last). Values are compared as their compact JSON text; the register starts as null.
//
// Usage: porcupine-driver [-timeout S] FILE
// Prints one JSON line {"result": "Ok"|"Illegal"|"Unknown", "ops", "partitions",
// "read_s", "check_s"} and exits 0 (Ok), 1 (Illegal), 2 (Unknown) or 254 (bad input).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	opRead = iota
	opWrite
	opCas
)

const (
	resOk = iota
	resFail
	resInfo
)

type input struct {
	kind int
	key  string
	a, b string // write: a; cas: a -> b
}

type output struct {
	kind  int
	value string // a read's value
}

type event struct {
	Process json.RawMessage `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Value   json.RawMessage `json:"value"`
	Time    int64           `json:"time"`
	Error   json.RawMessage `json:"error"`
}


func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 {
		return "null"
	}
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// split returns the key and the value of a keyed [key, v].
func split(raw json.RawMessage) (string, json.RawMessage, error) {
	var kv []json.RawMessage
	if err := json.Unmarshal(raw, &kv); err != nil || len(kv) != 2 {
		return "", nil, fmt.Errorf("value %s is not [key, v]", raw)
	}
	return compact(kv[0]), kv[1], nil
}

func pair(raw json.RawMessage) (string, string, error) {
	var ab []json.RawMessage
	if err := json.Unmarshal(raw, &ab); err != nil || len(ab) != 2 {
		return "", "", fmt.Errorf("cas value %s is not [old, new]", raw)
	}
	return compact(ab[0]), compact(ab[1]), nil
}

// operation turns an invoke and its completion (nil: never completed) into an Operation;
// false when the op constrains nothing.
func operation(inv event, done *event) (porcupine.Operation, bool, error) {
	typ := "info"
	if done != nil {
		typ = done.Type
	}
	key, iv, err := split(inv.Value)
	if err != nil {
		return porcupine.Operation{}, false, err
	}
	in := input{key: key}
	out := output{kind: resOk}
	switch typ {
	case "fail":
		out.kind = resFail
	case "info":
		out.kind = resInfo
	}
	switch inv.F {
	case "read":
		if typ != "ok" {
			return porcupine.Operation{}, false, nil
		}
		_, ov, err := split(done.Value)
		if err != nil {
			return porcupine.Operation{}, false, err
		}
		in.kind, out.value = opRead, compact(ov)
	case "write":
		if typ == "fail" {
			return porcupine.Operation{}, false, nil
		}
		in.kind, in.a = opWrite, compact(iv)
	case "cas":
		if typ == "fail" && done != nil && len(done.Error) > 0 && string(done.Error) != "null" {
			return porcupine.Operation{}, false, nil
		}
		a, b, err := pair(iv)
		if err != nil {
			return porcupine.Operation{}, false, err
		}
		in.kind, in.a, in.b = opCas, a, b
	default:
		return porcupine.Operation{}, false, fmt.Errorf("unknown f %q", inv.F)
	}
	ret := int64(math.MaxInt64)
	if typ != "info" {
		ret = done.Time
	}
	return porcupine.Operation{Input: in, Call: inv.Time, Output: out, Return: ret}, true, nil
}

func readHistory(path string) ([]porcupine.Operation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	pending := map[string]event{}
	var ops []porcupine.Operation
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var ev event
		if err := json.Unmarshal(b, &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		p := string(ev.Process)
		if p == `"nemesis"` {
			continue
		}
		if ev.Type == "invoke" {
			pending[p] = ev
			continue
		}
		o, ok := pending[p]
		if !ok {
			return nil, fmt.Errorf("%s:%d: completion without an invoke", path, line)
		}
		delete(pending, p)
		op, keep, err := operation(o, &ev)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if keep {
			ops = append(ops, op)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, o := range pending {
		op, keep, err := operation(o, nil)
		if err != nil {
			return nil, err
		}
		if keep {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

func step(state, in, out interface{}) (bool, interface{}) {
	s := state.(string)
	i := in.(input)
	o := out.(output)
	switch i.kind {
	case opRead:
		return o.value == s, s
	case opWrite:
		return true, i.a
	}
	switch o.kind {
	case resOk:
		return s == i.a, i.b
	case resFail:
		return s != i.a, s
	}
	if s == i.a { // indeterminate: took effect here if it could (or later, or never: linearized last)
		return true, i.b
	}
	return true, s
}

func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(input).key
		i, ok := byKey[k]
		if !ok {
			i = len(parts)
			byKey[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func hashState(state interface{}) uint64 {
	h := fnv.New64a()
	h.Write([]byte(state.(string)))
	return h.Sum64()
}

var casRegister = porcupine.Model{
	Partition: partition,
	Init:      func() interface{} { return "null" },
	Step:      step,
	Hash:      hashState,
}

func main() {
	timeout := flag.Float64("timeout", 0, "seconds before the verdict is Unknown (0: none)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: porcupine-driver [-timeout S] FILE")
		os.Exit(254)
	}
	t0 := time.Now()
	ops, err := readHistory(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "porcupine-driver:", err)
		os.Exit(254)
	}
	t1 := time.Now()
	res := porcupine.CheckOperationsTimeout(casRegister, ops, time.Duration(*timeout*float64(time.Second)))
	t2 := time.Now()
	fmt.Printf("{\"result\":%q,\"ops\":%d,\"partitions\":%d,\"read_s\":%.3f,\"check_s\":%.3f}\n",
		res, len(ops), len(partition(ops)), t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds())
	switch res {
	case porcupine.Ok:
		os.Exit(0)
	case porcupine.Illegal:
		os.Exit(1)
	}
	os.Exit(2)
}
