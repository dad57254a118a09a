package armtest

import (
	"context"
	"net/netip"
)

// Machines boot (Booter.Boot) once their create operation ends and shut down once their delete
// operation ends.

// machine is what boots: a scale-set instance or a virtual machine.
type machine struct {
	info Instance
	// bootDone is closed when Boot returned; nil when Boot was never called.
	bootDone chan struct{}
	// failedWith is the error code of the operation that left it Failed, or empty.
	failedWith string
}

func machinesOf(ins []*vmInstance) []*machine {
	out := make([]*machine, len(ins))
	for i, in := range ins {
		out[i] = &in.machine
	}
	return out
}

// bootAll boots machines in their own goroutines, unless the server is closing.
func (s *Server) bootAll(ins []*machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, in := range ins {
		in.bootDone = make(chan struct{})
		s.boots.Add(1)
		if in.info.MetadataEndpoint == "" {
			in.info.MetadataEndpoint = s.metadataEndpoint(in)
		}
		info := in.info
		info.Reach = func(to netip.AddrPort) error { return s.Reach(info.ID, to) }
		info.HostAddress = s.HostAddress
		go func(in *machine) {
			defer s.boots.Done()
			defer close(in.bootDone)
			if err := s.opts.Booter.Boot(s.ctx, info); err != nil {
				s.opts.Logf("booting %s (%s): %v", in.info.ComputerName, in.info.InstanceID, err)
			}
		}(in)
	}
}

// shutdownAll shuts down deleted machines whose Boot was called, once Boot returned.
func (s *Server) shutdownAll(ins []*machine) {
	for _, in := range ins {
		s.mu.Lock()
		done := in.bootDone
		s.mu.Unlock()
		if done == nil {
			continue
		}
		<-done
		if err := s.opts.Booter.Shutdown(context.Background(), in.info); err != nil {
			s.opts.Logf("shutting down %s (%s): %v", in.info.ComputerName, in.info.InstanceID, err)
		}
	}
}
