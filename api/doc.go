// Package api is Wrench's HTTP API and its Go client.
//
// Routes (JSON unless noted; errors are {"error": "...", "fields": [...]}):
//
//	POST /v1/tasks                 submit a task: 201 with its status, 200 with
//	                               the existing status for a known id, 400 with
//	                               the fields at fault, 413 over the body limit
//	GET  /v1/tasks?state=&limit=&cursor=   a page of tasks, newest first
//	GET  /v1/tasks/{id}            the task's status (404 for an unknown id)
//	GET  /v1/tasks/{id}/events     Server-Sent Events; id = event sequence,
//	                               resume with Last-Event-ID; ends after the
//	                               result event
//	GET  /v1/tasks/{id}/patch      text/x-diff (204 when empty, 409 before
//	                               the task is final)
//	POST /v1/tasks/{id}/cancel     200 with the final status, 202 while the
//	                               running task is being stopped
//	GET  /healthz, /readyz, /metrics   unauthenticated
//
// With a token configured every /v1/ route requires
// "Authorization: Bearer <token>" (401 otherwise).
package api
