"""The ``framebus-python`` rows' subscriber process of ``framebus bench bus``: ``python -m framebus._benchpeer
CONTROL``.

It connects to the bench's control socket (SOCK_SEQPACKET) and answers the commands the Swift bench peer answers:
``bus PATH`` (subscribe: queue of 16, every format, the package's default engine), ``begin`` (reset the counts),
``report N`` (wait for N frames, at most 2 s without progress, then reply one JSON object: frames, p50, p99, p999,
cpuNanoseconds, lastNanoseconds), ``unsubscribe`` and ``quit``. A thread of its own takes the events, as a Python
consumer does: for each frame, its one-way latency (received - published, CLOCK_MONOTONIC), then release.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

import framebus


class Peer:
    def __init__(self, control: str):
        self.channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.channel.connect(control)
        self.lock = threading.Lock()
        self.latencies: list[int] = []
        self.last = 0
        self.cpu_start = time.process_time_ns()
        self.bus = None
        self.thread = None

    def consume(self, bus) -> None:
        frame_type = framebus.Frame
        latencies = self.latencies
        while True:
            event = bus.next_event(1.0)
            if event is None:
                if bus._finished:
                    return
                continue
            if isinstance(event, frame_type):
                received = event.received_time_ns
                latency = received - event.publish_time_ns
                event.release()
                with self.lock:
                    latencies.append(latency)
                    self.last = received

    def report(self, expected: int) -> str:
        last, idle = -1, 0
        while idle < 200:
            with self.lock:
                count = len(self.latencies)
            if count >= expected:
                break
            idle = idle + 1 if count == last else 0
            last = count
            time.sleep(0.01)
        with self.lock:
            values = sorted(self.latencies)
            frames, last_ns = len(values), self.last

        def at(percent: float) -> int:
            return values[min(len(values) - 1, int(len(values) * percent / 100))] if values else 0

        return json.dumps({"frames": frames, "p50": at(50), "p99": at(99), "p999": at(99.9),
                           "cpuNanoseconds": time.process_time_ns() - self.cpu_start, "lastNanoseconds": last_ns})

    def run(self) -> None:
        while True:
            message = self.channel.recv(4096)
            if not message:
                return
            words = message.decode().split()
            command = words[0] if words else ""
            if command == "begin":
                with self.lock:
                    self.latencies.clear()
                    self.last = 0
                    self.cpu_start = time.process_time_ns()
                self.reply("ok")
            elif command == "report":
                self.reply(self.report(int(words[1]) if len(words) > 1 else 0))
            elif command == "bus":
                # FRAMEBUS_BENCH_WAIT_SLICE_US: the native engine's wait_slice_us (what the bench's
                # framebus-poller-slice row sets for the Swift poller), for comparing the two.
                options = {}
                if os.environ.get("FRAMEBUS_BENCH_WAIT_SLICE_US"):
                    options["wait_slice_us"] = int(os.environ["FRAMEBUS_BENCH_WAIT_SLICE_US"])
                bus = framebus.Subscriber(words[1], accept=list(framebus.FORMATS), queue=16, timeout=10, wait=True,
                                          **options)
                self.bus = bus
                self.thread = threading.Thread(target=self.consume, args=(bus,), name="bench.python", daemon=True)
                self.thread.start()
                self.reply("ready")
            elif command == "unsubscribe":
                if self.bus is not None:
                    self.bus.close()
                    self.thread.join(30)
                    self.bus = self.thread = None
                self.reply("ok")
            elif command == "quit":
                return
            else:
                self.reply("unknown command")

    def reply(self, text: str) -> None:
        self.channel.send(text.encode())


if __name__ == "__main__":
    Peer(sys.argv[1]).run()
