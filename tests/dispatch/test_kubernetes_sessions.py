"""KubernetesBackend's sessions at the HTTP boundary: the official client's ``kubernetes.stream`` talks
to the fake API server over a real websocket, which plays ``pods/exec`` (``v5.channel.k8s.io`` /
``v4.channel.k8s.io``) and ``pods/portforward`` frame by frame (tests/dispatch/fake_kube.py).
Nothing in the client is mocked."""

from __future__ import annotations

import json
import socket
import struct

import pytest
from kubernetes import client as k8s_client

from scheduler.dispatch.base import DispatchPermanentError, DispatchTransientError
from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.dispatch.proc_net import listening_ports_parse
from tests.dispatch.fake_kube import FIXTURES, PORTFORWARD_PROTOCOLS, FakeWebSocket

NS = "osmo-jobs"
POD = "train-1-trainers-worker-0"
EXEC = f"/api/v1/namespaces/{NS}/pods/{POD}/exec"
FORWARD = f"/api/v1/namespaces/{NS}/pods/{POD}/portforward"
V4 = ("v4.channel.k8s.io",)
SUCCESS = {"metadata": {}, "status": "Success"}

# /proc/net/tcp then /proc/net/tcp6 as ``cat`` prints them: 8080 on every IPv4 address (uid 1000),
# 5001 on the IPv4 loopback (uid 0), a connection to 8080 (not listening), 8081 on every IPv6 address.
PROC_NET_TCP = (FIXTURES / "proc_net_tcp.txt").read_text()


def exit_failure(code: int) -> dict:
    """The Status the API server sends on channel 3 for a command that exited with ``code``."""
    return {"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: "
            f"error executing command [sh -c exit {code}], exit code {code}", "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def forbidden(resource: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'pods "{POD}" is forbidden: User "system:serviceaccount:osmo:osmo-sessions" cannot create '
                       f'resource "{resource}" in API group "" in the namespace "{NS}"',
            "reason": "Forbidden", "details": {"name": POD, "kind": "pods"}, "code": 403}


def read_all(process) -> tuple[bytes, bytes]:
    out, err = b"", b""
    while True:
        channel, data = process.read()
        if not data:
            return out, err
        if channel == 1:
            out += data
        else:
            err += data


def ports_script(text: str = PROC_NET_TCP, code: int = 0):
    def play(ws: FakeWebSocket) -> None:
        ws.send(1, text.encode())
        ws.send(3, json.dumps(SUCCESS if code == 0 else exit_failure(code)).encode())
    return play


# ------------------------------------------------------------------------------------------------
# exec
# ------------------------------------------------------------------------------------------------
def test_exec_streams_stdout_and_stderr_and_a_success_is_exit_code_0(kube_api, kube_backend):
    # given the API server runs the command: two lines on stdout and stderr, then Success
    def play(ws: FakeWebSocket) -> None:
        assert ws.protocol == "v5.channel.k8s.io"
        ws.send(1, b"out 1\n")
        ws.send(2, b"err 1\n")
        ws.send(1, b"out 2\n")
        ws.send(3, json.dumps(SUCCESS).encode())
    kube_api.websocket(EXEC, play)

    # when
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sh", "-c", "echo hi"])
    out, err = read_all(process)

    # then the task's container was asked for, both protocols offered, v5 first, and the code is 0
    assert (out, err, process.wait(5)) == (b"out 1\nout 2\n", b"err 1\n", 0)
    [request] = kube_api.requests
    assert request.query == {"command": ["sh", "-c", "echo hi"], "container": ["task"], "stdin": ["true"],
                             "stdout": ["true"], "stderr": ["true"], "tty": ["false"]}
    assert request.headers["sec-websocket-protocol"] == "v5.channel.k8s.io,v4.channel.k8s.io"
    assert process.tty is False
    process.close()


def test_exec_exit_code_comes_from_the_failure_status(kube_api, kube_backend):
    kube_api.websocket(EXEC, lambda ws: ws.send(3, json.dumps(exit_failure(3)).encode()))
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sh", "-c", "exit 3"])
    assert read_all(process) == (b"", b"")
    assert process.wait(5) == 3
    process.close()


def test_exec_a_command_that_could_not_start_says_why_on_stderr(kube_api, kube_backend):
    # given the kubelet could not start it: a Failure without an ExitCode cause
    status = {"metadata": {}, "status": "Failure", "reason": "InternalError",
              "message": 'exec: "nosuch": executable file not found in $PATH'}
    kube_api.websocket(EXEC, lambda ws: ws.send(3, json.dumps(status).encode()))
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["nosuch"])
    assert read_all(process) == (b"", b'exec: "nosuch": executable file not found in $PATH\n')
    assert process.wait(5) == 1
    process.close()


def test_exec_stdin_is_written_and_closed_with_v5_close_frames(kube_api, kube_backend):
    # given a server that echoes stdin once the client closed it (cat)
    def play(ws: FakeWebSocket) -> None:
        frames = ws.recv_until(bytes([255, 0]))
        assert frames == [b"\x00hello ", b"\x00world", bytes([255, 0])]
        ws.send(1, b"".join(frame[1:] for frame in frames[:-1]))
        ws.send(3, json.dumps(SUCCESS).encode())
    kube_api.websocket(EXEC, play)
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["cat"])

    # when
    process.write(b"hello ")
    process.write(b"world")
    process.close_stdin()

    # then
    assert read_all(process) == (b"hello world", b"")
    assert process.wait(5) == 0
    process.close()


def test_exec_with_a_terminal_sends_resize_frames_and_eof_as_the_terminals_character(kube_api, kube_backend):
    def play(ws: FakeWebSocket) -> None:
        assert ws.recv() == b"\x04" + json.dumps({"Width": 120, "Height": 40}).encode()
        assert ws.recv() == b"\x00ls\r"
        assert ws.recv() == b"\x00\x04"  # Ctrl-D, not a close frame: the terminal's own EOF
        ws.send(1, b"ls\r\nfile\r\n")
        ws.send(3, json.dumps(SUCCESS).encode())
    kube_api.websocket(EXEC, play)

    # when
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["bash"], tty=True)
    process.resize(120, 40)
    process.write(b"ls\r")
    process.close_stdin()

    # then stderr was not asked for (a terminal merges it), and the output came back on stdout
    assert read_all(process) == (b"ls\r\nfile\r\n", b"")
    assert process.wait(5) == 0
    assert kube_api.requests[0].query["tty"] == ["true"]
    assert kube_api.requests[0].query["stderr"] == ["false"]
    assert process.tty is True
    process.close()


def test_exec_against_a_v4_only_server_falls_back_and_sends_no_close_frame(kube_api, kube_backend):
    # given an API server older than 1.30: v4 only
    def play(ws: FakeWebSocket) -> None:
        assert ws.protocol == "v4.channel.k8s.io"
        assert ws.recv() == b"\x00a"
        assert ws.recv() == b"\x00b"  # close_stdin between them sent nothing: v4 has no close frame
        ws.send(1, b"ab")
        ws.send(3, json.dumps(exit_failure(2)).encode())
    kube_api.websocket(EXEC, play, protocols=V4)
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["cat"])

    # when
    process.write(b"a")
    process.close_stdin()
    process.write(b"b")

    # then
    assert read_all(process) == (b"ab", b"")
    assert process.wait(5) == 2
    assert process.protocol == "v4.channel.k8s.io"
    process.close()


def test_exec_cut_before_its_status_ends_with_255_and_says_so(kube_api, kube_backend):
    kube_api.websocket(EXEC, lambda ws: ws.send(1, b"partial"))  # then the server closes: no Status
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sleep", "9"])
    out, err = read_all(process)
    assert (out, process.wait(5)) == (b"partial", 255)
    assert b"ended before the command's exit status" in err
    process.close()


def test_exec_close_ends_the_stream_and_a_later_write_is_a_broken_pipe(kube_api, kube_backend):
    # given a command that runs until the client leaves
    def play(ws: FakeWebSocket) -> None:
        ws.send(1, b"started\n")
        assert ws.recv() is None  # the client's close frame
    kube_api.websocket(EXEC, play)
    process = kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sleep", "600"])
    assert process.read() == (1, b"started\n")

    # when
    process.close()
    process.close()  # idempotent

    # then the reader ended, the server saw the close, and input goes nowhere
    assert process.read() == (0, b"")
    assert process.wait(1) is not None
    kube_api.settle()
    assert kube_api.sockets[0].client_closed
    with pytest.raises(BrokenPipeError):
        process.write(b"late")


# ------------------------------------------------------------------------------------------------
# task_ports and port_connect
# ------------------------------------------------------------------------------------------------
def test_task_ports_are_read_from_proc_net_by_an_exec_in_the_task_container(kube_api, kube_backend):
    kube_api.websocket(EXEC, ports_script())
    ports = kube_backend.task_ports(namespace=NS, pod_name=POD)
    assert ports == {8080: "127.0.0.1", 5001: "127.0.0.1", 8081: "::1"}
    [request] = kube_api.requests
    assert request.query == {"command": ["cat", "/proc/net/tcp", "/proc/net/tcp6"], "container": ["task"],
                             "stdin": ["false"], "stdout": ["true"], "stderr": ["true"], "tty": ["false"]}


def test_task_ports_without_tcp6_still_lists_ipv4(kube_api, kube_backend):
    # given a pod without IPv6: cat prints tcp, complains about tcp6 and exits 1
    def play(ws: FakeWebSocket) -> None:
        ws.send(1, PROC_NET_TCP.split("  sl  local_address                         ")[0].encode())
        ws.send(2, b"cat: /proc/net/tcp6: No such file or directory\n")
        ws.send(3, json.dumps(exit_failure(1)).encode())
    kube_api.websocket(EXEC, play)
    assert kube_backend.task_ports(namespace=NS, pod_name=POD) == {8080: "127.0.0.1", 5001: "127.0.0.1"}


def test_task_ports_in_an_image_without_cat_is_permanent_and_says_why(kube_api, kube_backend):
    status = {"metadata": {}, "status": "Failure", "reason": "InternalError",
              "message": 'exec: "cat": executable file not found in $PATH'}
    kube_api.websocket(EXEC, lambda ws: ws.send(3, json.dumps(status).encode()))
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.task_ports(namespace=NS, pod_name=POD)
    assert str(caught.value) == (f"could not read the ports pod {NS}/{POD} listens on (cat /proc/net/tcp "
                                 '/proc/net/tcp6 in its task container): exec: "cat": executable file not found '
                                 "in $PATH")


def test_port_connect_carries_bytes_both_ways_through_the_port_forward_framing(kube_api, kube_backend):
    # given the task listens on 8080 and the API server forwards to it: the port as 2 bytes little
    # endian first on the data channel (0) and on the error channel (1), then data
    port_le = struct.pack("<H", 8080)

    def play(ws: FakeWebSocket) -> None:
        assert ws.protocol == "v4.channel.k8s.io"
        ws.send(0, port_le)
        ws.send(1, port_le)
        assert ws.recv() == b"\x00GET / HTTP/1.0\r\n\r\n"
        ws.send(0, b"HTTP/1.0 200 OK\r\n\r\n")
        ws.send(0, b"hello")
        assert ws.recv() is None  # the client closes once its socket is closed
    kube_api.websocket(EXEC, ports_script())
    kube_api.websocket(FORWARD, play, protocols=PORTFORWARD_PROTOCOLS)

    # when
    sock = kube_backend.port_connect(namespace=NS, pod_name=POD, port=8080)
    sock.settimeout(5)
    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
    received = b""
    while len(received) < len(b"HTTP/1.0 200 OK\r\n\r\nhello"):
        chunk = sock.recv(65536)
        assert chunk, f"the forward ended early after {received!r}"
        received += chunk
    sock.close()

    # then it is a socket, the ports were checked first, and one port was forwarded
    assert isinstance(sock, socket.socket)
    assert received == b"HTTP/1.0 200 OK\r\n\r\nhello"
    assert [request.path for request in kube_api.requests] == [EXEC, FORWARD]
    assert kube_api.requests[1].query == {"ports": ["8080"]}


def test_port_connect_ends_when_the_task_closes_the_connection(kube_api, kube_backend):
    port_le = struct.pack("<H", 8080)

    def play(ws: FakeWebSocket) -> None:
        ws.send(0, port_le)
        ws.send(1, port_le)
        ws.send(0, b"bye")
    kube_api.websocket(EXEC, ports_script())
    kube_api.websocket(FORWARD, play, protocols=PORTFORWARD_PROTOCOLS)
    sock = kube_backend.port_connect(namespace=NS, pod_name=POD, port=8080)
    sock.settimeout(5)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    assert received == b"bye"
    sock.close()


def test_port_connect_to_a_port_not_listened_on_is_refused_without_a_forward(kube_api, kube_backend):
    kube_api.websocket(EXEC, ports_script())
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.port_connect(namespace=NS, pod_name=POD, port=9090)
    assert str(caught.value) == "the task does not listen on port 9090 (it listens on: 5001, 8080, 8081)"
    assert [request.path for request in kube_api.requests] == [EXEC]  # no port-forward asked for


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------
def test_a_403_on_exec_names_the_verb_and_the_subresource(kube_api, kube_backend):
    # given RBAC without create on pods/exec: the upgrade is refused with a Status
    kube_api.reply("GET", EXEC, 403, forbidden("pods/exec"))
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sh"])
    assert str(caught.value) == (
        f"Kubernetes API exec in pod {NS}/{POD}: HTTP 403 Forbidden: {forbidden('pods/exec')['message']} (the "
        f"service's Kubernetes account needs the create verb on pods/exec in namespace {NS}: docs/kubernetes.md §3)")
    assert len(kube_api.requests) == 1  # a user waits: not retried


def test_a_403_on_port_forward_names_pods_portforward(kube_api, kube_backend):
    kube_api.websocket(EXEC, ports_script())
    kube_api.reply("GET", FORWARD, 403, forbidden("pods/portforward"))
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.port_connect(namespace=NS, pod_name=POD, port=8080)
    assert "HTTP 403 Forbidden" in str(caught.value)
    assert "needs the create verb on pods/portforward in namespace osmo-jobs" in str(caught.value)


def test_a_pod_gone_is_permanent(kube_api, kube_backend):
    gone = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'pods "{POD}" not found', "reason": "NotFound", "details": {"name": POD, "kind": "pods"},
            "code": 404}
    kube_api.reply("GET", EXEC, 404, gone)
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.task_ports(namespace=NS, pod_name=POD)
    assert str(caught.value) == (f'Kubernetes API exec in pod {NS}/{POD}: HTTP 404 NotFound: pods "{POD}" not '
                                 "found (the pod is gone)")


def test_a_busy_api_server_is_transient(kube_api, kube_backend):
    kube_api.reply("GET", EXEC, 503, "status_service_unavailable.json")
    with pytest.raises(DispatchTransientError) as caught:
        kube_backend.exec_start(namespace=NS, pod_name=POD, argv=["sh"])
    assert "HTTP 503" in str(caught.value)


def test_an_unreachable_api_server_is_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    backend = KubernetesBackend.from_settings(api_client=k8s_client.ApiClient(configuration),
                                              request_timeout=(1.0, 2.0))
    with pytest.raises(DispatchTransientError) as caught:
        backend.exec_start(namespace=NS, pod_name=POD, argv=["sh"])
    assert str(caught.value).startswith(f"Kubernetes API exec in pod {NS}/{POD}: ConnectionRefusedError")


def test_an_api_server_that_never_answers_the_upgrade_times_out_as_transient(kube_api):
    # given a server that accepts the connection and says nothing
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        configuration = k8s_client.Configuration()
        configuration.host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        backend = KubernetesBackend.from_settings(api_client=k8s_client.ApiClient(configuration),
                                                  request_timeout=(0.3, 0.5))
        with pytest.raises(DispatchTransientError) as caught:
            backend.exec_start(namespace=NS, pod_name=POD, argv=["sh"])
    assert str(caught.value) == f"Kubernetes API exec in pod {NS}/{POD}: no answer within 0.5 s"


# ------------------------------------------------------------------------------------------------
# The /proc/net parser both backends use
# ------------------------------------------------------------------------------------------------
def test_proc_net_parser_filters_by_uid_when_asked():
    assert listening_ports_parse(PROC_NET_TCP, 1000) == {8080: "127.0.0.1", 8081: "::1"}
    assert listening_ports_parse(PROC_NET_TCP, 0) == {5001: "127.0.0.1"}
    assert listening_ports_parse("", None) == {}
