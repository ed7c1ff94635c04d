import type { PartialCatalog } from "./en.js";

/**
 * Korean message catalog (issue 25 item 7). Korean has one plural form (`_other`); `{{name}}`
 * parameters are the same as English's.
 */
export const ko = {
  approval: {
    request: {
      title: "승인 요청",
      body: "승인 {{approval_id}} 건이 {{expires_at}} 전까지 결정을 기다리고 있습니다.",
    },
    reminder: {
      title: "승인 재알림",
      body: "승인 {{approval_id}} 건이 아직 {{expires_at}} 전까지 결정을 기다리고 있습니다.",
    },
    digest: {
      title_one: "승인 요청 {{count}}건",
      title_other: "승인 요청 {{count}}건",
      body_one: "승인 {{count}}건이 결정을 기다리고 있습니다:\n{{items}}",
      body_other: "승인 {{count}}건이 결정을 기다리고 있습니다:\n{{items}}",
    },
  },
  break_glass: {
    page: {
      title: "긴급 접근(break-glass) 활성화",
      body: "{{actor}} 님이 {{expires_at}}까지 긴급 접근(break-glass)을 활성화했습니다. 사유: {{reason}}",
    },
  },
  incident: {
    severity_changed: {
      title: "인시던트 {{incident_id}}: 심각도 {{from}} → {{to}}",
      body: "인시던트 {{incident_id}}의 확정 심각도가 {{at}}에 {{from}}에서 {{to}}(으)로 높아졌습니다.",
    },
    open: {
      subject: "[{{severity}}] 인시던트 {{incident_id}} 발생",
      incident: "인시던트",
      status: "상태",
      severity: "심각도",
      opened: "발생 시각",
      events: "이벤트 수",
      assignment: "담당",
      unassigned: "미지정",
      audit_id: "감사 ID",
      open_in_console: "콘솔에서 열기",
    },
  },
  notify: {
    test: {
      title: "[테스트] blastplane 테스트 알림",
      body: "{{sent_at}}에 경로 {{route}}(으)로 보낸 테스트 알림입니다. 조치할 필요는 없습니다.",
    },
  },
} satisfies PartialCatalog;
