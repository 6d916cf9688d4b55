package main

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
)

// The dlq commands take spec files as status does: the files say the vhost
// and which queues there are, so that a command names a queue of the spec
// without --vhost, and a queue the spec does not have is said to be so
// before the broker is asked. A positional argument ending in .yaml or
// .yml is a spec file; any other is a queue, as it was before the
// commands took files.

// splitSpecArgs parts positional arguments into spec files and queues.
func splitSpecArgs(args []string) (files, queues []string) {
	for _, a := range args {
		switch strings.ToLower(filepath.Ext(a)) {
		case ".yaml", ".yml":
			files = append(files, a)
		default:
			queues = append(queues, a)
		}
	}
	return files, queues
}

// specQueues is what spec files declare: the queues of each vhost.
type specQueues struct {
	files  []string
	vhosts map[string][]string // vhost → its queues, sorted
}

func loadSpecQueues(e *env, files []string) (*specQueues, error) {
	_, t, err := loadExpanded(e, files)
	if err != nil {
		return nil, err
	}
	sq := &specQueues{files: files, vhosts: map[string][]string{}}
	for _, v := range t.VhostNames() {
		sq.vhosts[v] = nil
	}
	for _, q := range t.Queues {
		sq.vhosts[q.Vhost] = append(sq.vhosts[q.Vhost], q.Name)
	}
	for v := range sq.vhosts {
		slices.Sort(sq.vhosts[v])
	}
	return sq, nil
}

// vhost is the one vhost of the specs, or flag when given, which must be
// one of theirs: a sweep names no queue that would choose among several.
func (sq *specQueues) vhost(flag string) (string, error) {
	names := slices.Sorted(maps.Keys(sq.vhosts))
	switch {
	case flag != "" && !slices.Contains(names, flag):
		return "", input(fmt.Errorf("--vhost %q is not a vhost of %s (%s)", flag, strings.Join(sq.files, ", "), quotedList(names)))
	case flag != "":
		return flag, nil
	case len(names) != 1:
		return "", input(fmt.Errorf("%s name vhosts %s: give one with --vhost", strings.Join(sq.files, ", "), quotedList(names)))
	}
	return names[0], nil
}

// queueVhost is the vhost of the specs that declares queue (flag's, when
// given). A queue they do not declare is an error that names their DLQs,
// the queues these commands are for.
func (sq *specQueues) queueVhost(queue, flag string) (string, error) {
	var in []string
	for v, qs := range sq.vhosts {
		if (flag == "" || v == flag) && slices.Contains(qs, queue) {
			in = append(in, v)
		}
	}
	slices.Sort(in)
	switch len(in) {
	case 1:
		return in[0], nil
	case 0:
		return "", input(fmt.Errorf("queue %q is not a queue of %s%s; %s", queue, strings.Join(sq.files, ", "), inVhost(flag), sq.dlqs(flag)))
	}
	return "", input(fmt.Errorf("queue %q is in vhosts %s of %s: give one with --vhost", queue, quotedList(in), strings.Join(sq.files, ", ")))
}

// dlqs lists the DLQs of the specs (of vhost, when given), for an error.
func (sq *specQueues) dlqs(vhost string) string {
	var out []string
	for _, v := range slices.Sorted(maps.Keys(sq.vhosts)) {
		if vhost != "" && v != vhost {
			continue
		}
		for _, q := range sq.vhosts[v] {
			if strings.HasSuffix(q, contract.DeadLetterQueue("")) {
				out = append(out, fmt.Sprintf("%q (vhost %q)", q, v))
			}
		}
	}
	if len(out) == 0 {
		return "they declare no DLQ"
	}
	return "their DLQs: " + strings.Join(out, ", ")
}

func inVhost(v string) string {
	if v == "" {
		return ""
	}
	return fmt.Sprintf(" in vhost %q", v)
}

func quotedList(names []string) string {
	return strings.Join(quoted(names), ", ")
}

// queueArgs are the positional arguments of a command on one queue:
// spec files, then the queue.
type queueArgs struct {
	Args []string `arg:"" name:"FILE|QUEUE" help:"The queue, usually a DLQ, after any spec files (*.yaml, *.yml) that declare it, as status takes them: the queue's vhost is theirs."`
}

// target is the queue and its vhost: the vhost given with --vhost, else the
// one of the spec files that declares the queue, else "/" (defaulted).
func (a *queueArgs) target(e *env, vhostFlag string) (queue, vhost string, defaulted bool, err error) {
	files, queues := splitSpecArgs(a.Args)
	if len(queues) != 1 {
		return "", "", false, input(fmt.Errorf("want one queue after the spec files, got %s", english.Count(len(queues), "queue", "queues")+listed(queues)))
	}
	queue = queues[0]
	if len(files) == 0 {
		return queue, cmp.Or(vhostFlag, "/"), vhostFlag == "", nil
	}
	sq, err := loadSpecQueues(e, files)
	if err != nil {
		return "", "", false, err
	}
	vhost, err = sq.queueVhost(queue, vhostFlag)
	return queue, vhost, false, err
}

// listed is " (a, b)" for names, nothing for none.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + quotedList(names) + ")"
}
