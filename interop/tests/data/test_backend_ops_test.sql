ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes
CREATE TABLE IF NOT EXISTS test_backend_ops (
  test_time TEXT,
  build_commit TEXT,
  backend_name TEXT,
  op_name TEXT,
  op_params TEXT,
  test_mode TEXT,
  supported INTEGER,
  passed INTEGER,
  error_message TEXT,
  time_us REAL,
  flops REAL,
  bandwidth_gb_s REAL,
  memory_kb INTEGER,
  n_runs INTEGER,
  device_description TEXT,
  backend_reg_name TEXT
);

INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-11-30T03:00:01Z', 'b7e1a3c', 'CUDA0', 'MUL_MAT', 'type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1', 'test', '1', '1', '', '0.000000', '0.000000', '0.000000', '0', '0', '', '');
INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-11-30T03:00:01Z', 'b7e1a3c', 'CUDA0', 'MUL_MAT', 'type_a=q6_K,type_b=f32,m=16,n=16,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1', 'test', '1', '0', 'test failed', '0.000000', '0.000000', '0.000000', '0', '0', '', '');
INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-11-30T03:00:02Z', 'b7e1a3c', 'CUDA0', 'MUL_MAT', 'type_a=iq1_s,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1', 'test', '0', '0', 'not supported', '0.000000', '0.000000', '0.000000', '0', '0', '', '');
INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-11-30T03:00:02Z', 'b7e1a3c', 'CUDA0', 'MUL_MAT', 'type_a=q4_0,type_b=f32,m=4096,n=512,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1', 'perf', '1', '1', '', '812.250000', '74012345678901.000000', '0.000000', '0', '123', '', '');
INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-11-30T03:00:03Z', 'b7e1a3c', 'CUDA0', 'MUL_MAT', 'type_a=q8_0,type_b=f32,m=32,n=4,k=512,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1', 'test', '1', '0', 'compare failed', '0.000000', '0.000000', '0.000000', '0', '0', '', '');
