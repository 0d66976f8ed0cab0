#!/bin/bash
# cats.sh BIN PROF CYCLES: cumulative shares of a CPU profile for the items of BENCHMARKS.md ceil17
bin=$1 prof=$2 n=$3
tot=$(go tool pprof -top -nodecount=1 $bin $prof 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*\)\(m\?s\).*/\1 \2/p')
echo "total: $tot"
for c in "write(2) (pipe.write)=syscall\.write$" "read(2) (reader)=syscall\.read$" "epoll_wait (netpoll)=runtime\.netpoll$" "futex (thread wake/sleep)=runtime\.futex$" "encode (batch.add)=redis\.\(\*batch\)\.add$" "decode (batch.UnmarshalRESP)=redis\.\(\*batch\)\.UnmarshalRESP$" "protoactor send (PID.sendUserMessage)=actor\.\(\*PID\)\.sendUserMessage$" "protoactor receive (InvokeUserMessage)=actor\.\(\*actorContext\)\.InvokeUserMessage$" "node.Receive=actors\.\(\*node\)\.Receive$" "coordinator.Receive=actors\.\(\*coordinator\)\.Receive$" "mailbox queue push/pop=actors\.\(\*queue\)\.(push|pop)$" "scheduler (schedule)=runtime\.schedule$" "goroutine exit (goexit0)=runtime\.goexit0$" "goroutine start (newproc)=runtime\.newproc$" "GC (gcBgMarkWorker)=runtime\.gcBgMarkWorker$" "malloc (mallocgc)=runtime\.mallocgc$" "stack growth (newstack)=runtime\.newstack$" "engine acquire (Engine.acquireMode)=engine\.\(\*Engine\)\.acquireMode$" "engine unlock (lock.unlock)=engine\.\(\*lock\)\.unlock$" "bench loop (bench.Run.func1)=bench\.Run\.func1$" "crypto rand (newValue)=engine\.\(\*lock\)\.newValue$"; do
  name=${c%%=*} re=${c#*=}
  v=$(go tool pprof -top -cum -nodecount=400 $bin $prof 2>/dev/null | grep -E "$re" | head -1 | awk '{print $4, $5}')
  echo "$name: $v"
done
