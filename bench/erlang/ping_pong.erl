#!/usr/bin/env escript
%% Ping-pong in Erlang, the suite's `ping_pong` peer (see BENCHMARKS.md, "The
%% workloads").
%%
%%     ERL_FLAGS="+S 2:2" escript bench/erlang/ping_pong.erl [ROUNDS]
%%
%% The main process spawns a ping process, which spawns its pong and sends it
%% 0, 1, ..., ROUNDS - 1 one at a time; pong answers each N with N + 1, ping adds up
%% the answers, stops pong with `stop` and sends the sum to the main process.
%% One untimed run, then one timed run of the work alone; prints the suite's
%% `peer-result` line.
-mode(compile).

main(Args) ->
    Rounds = case Args of [N] -> list_to_integer(N); [] -> 200000 end,
    measure(fun() -> run(Rounds) end).

%% Runs Work once untimed, then once timed; prints both results, the wall time and
%% the VM's CPU time (all its threads, to the millisecond) of the timed run.
measure(Work) ->
    Warmup = Work(),
    {Cpu0, _} = statistics(runtime),
    T0 = erlang:monotonic_time(nanosecond),
    Result = Work(),
    T1 = erlang:monotonic_time(nanosecond),
    {Cpu1, _} = statistics(runtime),
    io:format("peer-result warmup=~b result=~b wall_secs=~.9f cpu_secs=~.3f~n",
              [Warmup, Result, (T1 - T0) / 1.0e9, (Cpu1 - Cpu0) / 1000]).

run(Rounds) ->
    Me = self(),
    spawn(fun() -> Me ! {sum, ping(Rounds)} end),
    receive {sum, Sum} -> Sum end.

ping(Rounds) ->
    Me = self(),
    Pong = spawn(fun() -> pong(Me) end),
    Sum = ping(Pong, 0, Rounds, 0),
    Pong ! stop,
    Sum.

ping(_Pong, Rounds, Rounds, Sum) -> Sum;
ping(Pong, I, Rounds, Sum) ->
    Pong ! I,
    receive N -> ping(Pong, I + 1, Rounds, Sum + N) end.

pong(Ping) ->
    receive
        stop -> ok;
        N -> Ping ! N + 1, pong(Ping)
    end.
