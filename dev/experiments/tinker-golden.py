"""
Golden protobuf bytes for test/remote-codec.test.ts, made with the message classes the Tinker SDK
ships (tinker_public_pb2.py of SDK 0.23+, which has forward_only) and Debian's python3-protobuf,
so the tests check our schema against the published one and not only against itself.

  apt-get install python3-protobuf
  /usr/bin/python3 dev/experiments/tinker-golden.py DIR_WITH_tinker_public_pb2 > test/fixtures/tinker-golden.json

Each message holds at most one entry per map, so its bytes do not depend on map order.
"""
import json
import struct
import sys

sys.path.insert(0, sys.argv[1])
import tinker_public_pb2 as pb  # noqa: E402


def i32(xs):
    return struct.pack("<%di" % len(xs), *xs)


def f32(xs):
    return struct.pack("<%df" % len(xs), *xs)


def i64(xs):
    return struct.pack("<%dq" % len(xs), *xs)


out = {}

req = pb.ForwardBackwardRequest(model_id="model-1", seq_id=7, loss_fn="importance_sampling", forward_only=False)
req.loss_fn_config["clip_low_threshold"] = 0.75
d = req.data.add()
d.model_input.add().encoded_text.tokens = i32([5, 6, 7])
t = d.loss_fn_inputs["target_tokens"]
t.dense = i64([6, 7, 8])
t.dtype = pb.DTYPE_INT64
t.shape.append(3)
out["forward_backward_request"] = req.SerializeToString().hex()

fwd = pb.ForwardBackwardRequest(model_id="m", seq_id=1, loss_fn="cross_entropy", forward_only=True)
out["forward_only_request"] = fwd.SerializeToString().hex()

sr = pb.SampleResponse()
s = sr.sequences.add()
s.stop_reason = pb.STOP_REASON_LENGTH
s.tokens = i32([11, 12])
s.logprobs = f32([-0.5, -1.25])
s2 = sr.sequences.add()
s2.stop_reason = pb.STOP_REASON_STOP
s2.tokens = i32([13])
s2.logprobs = f32([-2.0])
sr.prompt_logprobs = f32([float("nan"), -3.0, -0.25])
out["sample_response"] = sr.SerializeToString().hex()

fo = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
fo.metrics["loss:sum"] = 1.5
rec = fo.loss_fn_outputs.add(type_tag="ArrayRecord", num_datums=2)
bt = rec.fields["logprobs"]
bt.data = f32([-1.0, -2.0, -3.0])
bt.offsets = i64([0, 8, 12])
bt.dtype = pb.DTYPE_FLOAT32
out["forward_backward_output"] = fo.SerializeToString().hex()

json.dump(out, sys.stdout, indent=2)
print()
