"""Wire formats beside the native routes: AsyncAPI (submit/poll over a durable job store) and the
Open Inference Protocol (KServe V2). Each is a front door onto the same engine."""
