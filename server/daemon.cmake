# qgated: the qgate_server library (service, scheduler, job runner, worker processes) and a thin main.
# The application layer (jobs_application.h) and the row<->message mappings it needs: its own
# library, so it is tested against a real store without the scheduler, the runner or gRPC.
add_library(qgate_jobs STATIC
  src/job_records.cpp
  src/compare_builds.cpp
  src/series_changes.cpp
  src/gpu_choice.cpp
  src/job_gpu_records.cpp
  src/job_submission.cpp
  src/job_profile.cpp
  src/jobs_application.cpp
  src/result_import.cpp
  src/job_details.cpp)
target_include_directories(qgate_jobs PUBLIC include)
target_link_libraries(qgate_jobs
  PUBLIC qgate_grpc qgate_dashboard_grpc qgate_store qgate_profiles qgate_ab_stats qgate_common qgate_cotenant
  PRIVATE qgate_interop)

add_library(qgate_server STATIC
  src/artifact_store.cpp
  src/event_hub.cpp
  src/daemon_log.cpp
  src/job_event_log.cpp
  src/record_stream.cpp
  src/worker_process.cpp
  src/orphan_reaper.cpp
  src/worker_cgroups.cpp
  src/worker_channel.cpp
  src/job_control.cpp
  src/fault_classifier.cpp
  src/job_recorder.cpp
  src/arm_session.cpp
  src/parity_phase.cpp
  src/ab_phase.cpp
  src/output_identity.cpp
  src/job_runner.cpp
  src/gpu_pool.cpp
  src/served_gpus.cpp
  src/scheduler.cpp
  src/device_status.cpp
  src/harness_service.cpp
  src/upload_deadlines.cpp
  src/harness_devices.cpp
  src/dashboard_service.cpp
  src/listener_security.cpp
  src/connection_acceptor.cpp
  src/daemon.cpp)
target_include_directories(qgate_server PUBLIC include)
target_link_libraries(qgate_server
  PUBLIC qgate_jobs qgate_grpc qgate_store qgate_profiles qgate_ab_stats qgate_common qgate_cotenant
  PRIVATE gRPC::grpc++_reflection nlohmann_json::nlohmann_json qgate_dashboard_http)
# The log (daemon_log.h): public, since every part of the daemon logs with spdlog.
target_link_libraries(qgate_server PUBLIC spdlog::spdlog)
target_compile_definitions(qgate_server PRIVATE QGATE_VERSION="${PROJECT_VERSION}")
# The leak judge: pure (worker memory readings in, findings out), its own library so its tests
# need nothing else of the daemon.
add_library(qgate_leak_check STATIC src/leak_check.cpp)
target_include_directories(qgate_leak_check PUBLIC include)
target_link_libraries(qgate_leak_check PUBLIC qgate_grpc)  # MemoryLeak is in harness.proto
target_link_libraries(qgate_server PUBLIC qgate_leak_check)

add_executable(qgated src/qgated_main.cpp)
target_link_libraries(qgated PRIVATE qgate_server CLI11::CLI11)
target_compile_definitions(qgated PRIVATE QGATE_VERSION="${PROJECT_VERSION}" QGATE_COMMIT="${QGATE_GIT_COMMIT}")
set_target_properties(qgated PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_dependencies(qgated qgate-worker qgate_ref)

if(QGATE_BUILD_TESTS)
  add_subdirectory(tests)
endif()

# Service benchmark (not a test): QueryTrend latency (30 days, a year) and qgated's memory; see
# scripts/bench-service.sh.
add_custom_target(bench-service
  COMMAND ${CMAKE_COMMAND} -E env QGATE_SKIP_BUILD=1 QGATE_BUILD_DIR=${CMAKE_BINARY_DIR}
          bash ${CMAKE_SOURCE_DIR}/scripts/bench-service.sh
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  DEPENDS qgated qgate qgate-worker qgate_ref qgate-service-bench qgate-store-bench
  USES_TERMINAL)
add_executable(qgate-service-bench bench/service_bench.cpp)
target_link_libraries(qgate-service-bench PRIVATE qgate_grpc qgate_common nlohmann_json::nlohmann_json)
set_target_properties(qgate-service-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

# Load test: N concurrent clients against a real qgated for S seconds (scripts/load-test.sh runs the
# full 100 x 60 s; a 10 x 5 s smoke run is a ctest test in tests/).
add_executable(qgate-load-test bench/load_test.cpp)
target_link_libraries(qgate-load-test PRIVATE qgate_grpc nlohmann_json::nlohmann_json)
set_target_properties(qgate-load-test PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_dependencies(qgate-load-test qgated qgate-worker qgate_ref)

# libFuzzer targets (clang only; scripts/run-fuzzers.sh configures and runs them).
if(QGATE_BUILD_FUZZERS)
  add_subdirectory(fuzz)
endif()
