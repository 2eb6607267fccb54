"""Background passages: ordinary text about everything, in each language group kb serves.

They are never searched and never shown. Their vectors stand for "the rest of the world" when
the knowledge base is too small to speak for itself: each language's mean vector (for centring)
and the question's typical cosine with text that does not answer it (for the sufficiency
decision) are drawn from the index's own chunks, topped up with these passages, so a
knowledge base of one document is judged the way a large one is.

Written for kb (no outside source), on unrelated everyday topics, one paragraph each.
"""

from __future__ import annotations

import hashlib

BACKGROUND: dict[str, tuple[str, ...]] = {
    "other": (
        "Tomorrow will start cloudy with light rain in the morning, clearing by early afternoon. Highs around "
        "18 degrees, with a gentle breeze from the west. The weekend looks drier and slightly warmer.",
        "Check the tyre pressure once a month and before long trips, when the tyres are cold. The right "
        "pressure is printed on a sticker inside the driver's door, not on the tyre itself.",
        "Self-employed workers must keep receipts for business expenses for at least five years. Quarterly "
        "estimated payments are due in April, June, September and January.",
        "For the party we booked the community hall from two to five. The children will decorate cupcakes, "
        "play musical chairs and take home a small bag of sweets and a balloon.",
        "Most houseplants die from too much water, not too little. Let the top two centimetres of soil dry "
        "out before watering, and make sure the pot has a drainage hole.",
        "The 7:42 service to the city now leaves from platform 3. On Sundays trains run every half hour "
        "until noon and every hour after that; the last train departs at 23:15.",
        "A phone battery ages faster when it is kept at full charge in a hot car. Charging to about 80 "
        "percent and avoiding heat keeps more of its capacity after two years.",
        "The home side scored twice in the first half and held on despite a late penalty. Their goalkeeper "
        "made six saves, and the captain was substituted with a knee injury.",
        "The novel follows three sisters who return to their family farm after their father's death. The "
        "slow middle chapters pay off in a moving final scene by the river.",
        "Before the interview, read the job description again and prepare two short stories that show how "
        "you solved a problem. Ask them what a successful first year would look like.",
        "Cast on sixty stitches with the thicker needles and knit two rows of rib. Change colour every ten "
        "rows; weave in the loose ends at the back before blocking the scarf.",
        "Brush twice a day for two minutes and floss once. Replace your toothbrush every three months, or "
        "sooner if the bristles are frayed. See the dentist for a check-up each year.",
        "The bank raised its fixed mortgage rate by a quarter point this week. Borrowers on variable rates "
        "will see higher monthly payments from the next billing cycle.",
        "In early spring the wetlands fill with migrating ducks and herons. Bring binoculars, walk quietly "
        "along the boardwalk, and note the time and place of each sighting.",
        "A volcano forms where molten rock rises through the crust. Shield volcanoes have gentle slopes of "
        "runny lava, while steep cones build up from ash and sticky lava.",
        "Jazz grew out of blues and ragtime in the early twentieth century. Swing bands filled dance halls "
        "in the thirties, and bebop later made the music faster and harder to dance to.",
        "Camping list: tent, sleeping bag, torch with spare batteries, water filter, first-aid kit, a "
        "warm hat, matches in a dry bag, and enough food for one extra day.",
        "Use a password manager and a different long password for every site. Turn on two-factor "
        "authentication for email and banking; never reuse the password of your email account.",
        "Hold each pose for five slow breaths. Beginners should bend their knees in forward folds and "
        "use a block under the hand in triangle pose instead of forcing the stretch.",
        "The museum is open Tuesday to Sunday from ten to six, and until nine on Thursdays. Entry is free "
        "for children under twelve; the café closes half an hour before the galleries.",
        "Most heat escapes through the roof and around windows. Adding loft insulation and sealing draughts "
        "around doors can cut a heating bill by a fifth in the first winter.",
        "Reward the puppy the moment it sits, then slowly add a second or two before the treat. Keep "
        "training sessions to five minutes and always end on a success.",
        "The meeting has moved to Thursday at 3 pm in room 204. Please send your slides by Wednesday "
        "evening; the budget review will take the first half hour.",
        "Our order number is 48213. The parcel was marked as delivered on Monday, but nothing arrived; "
        "the courier says the driver left it with a neighbour.",
    ),
    "cjk": (
        "颱風預計明天清晨登陸東部，氣象局已發布海上及陸上颱風警報。各縣市將於晚間八點前公布是否停班停課，請民眾做好防颱準備。",
        "逛夜市一定要吃蚵仔煎、鹽酥雞和珍珠奶茶。人潮最多的時段是晚上七點到九點，建議自備購物袋並準備零錢。",
        "捷運板南線從頂埔到南港展覽館，尖峰時段約四分鐘一班。轉乘公車在一小時內可享有折扣，使用悠遊卡即可自動計算。",
        "全民健康保險的保費依投保薪資計算。看診時須出示健保卡，部分負擔依醫院層級不同，慢性病連續處方箋可減免部分費用。",
        "高山烏龍茶生長在海拔一千公尺以上，茶湯清香甘甜。沖泡時水溫約九十五度，第一泡浸泡五十秒，之後每泡增加十秒。",
        "練習書法要先從楷書開始，注意握筆姿勢與運筆的輕重。每天臨帖半小時，比偶爾寫很久更能進步。",
        "今天股市開高走低，加權指數終場下跌八十點。電子股受到外資賣超影響，航運股則逆勢上漲。",
        "攀登玉山主峰需要事先申請入園與排雲山莊床位。高山天氣變化快，要準備保暖衣物、頭燈和足夠的飲水。",
        "中醫認為秋天容易乾燥，可以多吃白木耳、梨子和蓮子來潤肺。若咳嗽超過兩週，仍應就醫檢查。",
        "新的手機資費方案每月四百九十九元，網路吃到飽，網內互打免費。合約期間為兩年，提前解約需付違約金。",
        "租屋前要確認房東是否為屋主，並看清楚租約中押金、修繕責任與提前退租的規定。入住時最好拍照留下屋況紀錄。",
        "手沖咖啡建議粉水比例一比十五，水溫約九十二度。先用少量熱水悶蒸三十秒，再分三次慢慢注水。",
        "李白的詩風豪放飄逸，杜甫則多寫社會與百姓的苦難。兩人並稱李杜，是唐代詩歌最重要的代表。",
        "屋頂裝設太陽能板後，夏天的電費明顯下降。多餘的電力可以賣給電力公司，大約七到八年可以回本。",
        "昨晚的籃球比賽打到延長賽，主隊靠最後三秒的三分球逆轉勝。全場最佳球員拿下三十二分、十個籃板。",
        "電動機車的電池交換站遍布市區，換一次電只要幾秒鐘。月租方案依騎乘里程計費，適合每天通勤的人。",
        "寶寶六個月大後可以開始嘗試副食品，從米糊和蔬菜泥開始，一次只加入一種新食物，觀察是否過敏。",
        "綜合所得稅申報期間為每年五月，可以使用網路報稅。列舉扣除額需要保留醫療、保險與捐款的收據。",
        "貓咪每天需要喝足夠的水，可以在家中多放幾個水碗。定期梳毛能減少毛球，也能及早發現皮膚問題。",
        "學鋼琴的孩子每天練習二十分鐘就夠了，重點是專心。先分手練熟困難的小節，再慢慢合在一起。",
        "這個週末適合觀賞英仙座流星雨，午夜過後最多。請到光害少的地方，讓眼睛適應黑暗大約二十分鐘。",
        "糖尿病患者的飲食應控制精緻澱粉，多吃蔬菜與全穀類。三餐定時定量，並記錄飯後血糖的變化。",
        "會議改到星期四下午三點，在二樓會議室舉行。請在星期三晚上前寄出簡報，預算檢討會先進行半小時。",
        "訂單編號四八二一三的包裹顯示星期一已送達，但我們沒有收到。物流公司說司機把包裹交給了鄰居。",
    ),
    "thai": (
        "ฤดูฝนปีนี้เริ่มเร็วกว่าปกติ กรมอุตุนิยมวิทยาเตือนว่าจะมีฝนตกหนักในภาคเหนือและภาคตะวันออก "
        "ประชาชนที่อยู่ใกล้ลำน้ำควรติดตามประกาศอย่างใกล้ชิด",
        "ตลาดน้ำดำเนินสะดวกเปิดตั้งแต่เช้าตรู่ถึงเที่ยงวัน ควรไปถึงก่อนแปดโมงเพื่อหลีกเลี่ยงนักท่องเที่ยว "
        "และลองชิมก๋วยเตี๋ยวเรือกับผลไม้สดจากสวน",
        "รถไฟฟ้าบีทีเอสสายสุขุมวิทเปิดให้บริการตั้งแต่หกโมงเช้าถึงเที่ยงคืน ผู้โดยสารสามารถใช้บัตรแรบบิท "
        "หรือบัตรเครดิตแบบไร้สัมผัสแตะเข้าสถานีได้",
        "มวยไทยเป็นศิลปะการต่อสู้ที่ใช้หมัด เท้า เข่า และศอก นักมวยจะไหว้ครูก่อนขึ้นชกเพื่อแสดงความเคารพ ต่อครูบาอาจารย์",
        "ชาวนาในทุ่งกุลาร้องไห้ปลูกข้าวหอมมะลิในฤดูฝน และเก็บเกี่ยวในเดือนพฤศจิกายน ดินเค็มและอากาศแห้งทำให้ข้าวมีกลิ่นหอมเป็นพิเศษ",
        "วันพระคนไทยนิยมไปทำบุญตักบาตรที่วัดในตอนเช้า ฟังเทศน์ และรักษาศีล บางครอบครัวพาเด็ก ๆ ไปช่วยทำความสะอาดลานวัดด้วย",
        "เทศกาลสงกรานต์ตรงกับวันที่สิบสามถึงสิบห้าเมษายน ผู้คนเดินทางกลับบ้านเกิดเพื่อรดน้ำดำหัวผู้ใหญ่ และเล่นสาดน้ำคลายร้อน",
        "ผู้ประกันตนตามมาตรา 33 ได้รับสิทธิรักษาพยาบาล เงินทดแทนการขาดรายได้ และเงินบำนาญชราภาพ "
        "โดยลูกจ้างและนายจ้างจ่ายเงินสมทบฝ่ายละห้าเปอร์เซ็นต์",
        "ทุเรียนหมอนทองจากจันทบุรีจะออกสู่ตลาดมากที่สุดในเดือนพฤษภาคม เลือกลูกที่ก้านสดและเคาะแล้วมีเสียงกลวงเล็กน้อย",
        "การออมเงินควรเริ่มจากการแบ่งรายได้อย่างน้อยหนึ่งในสิบทันทีที่ได้รับเงินเดือน และมีเงินสำรองฉุกเฉินไว้ใช้จ่ายอย่างน้อยหกเดือน",
        "โรคไข้เลือดออกมียุงลายเป็นพาหะ ควรคว่ำภาชนะที่มีน้ำขังและทายากันยุง หากมีไข้สูงติดต่อกันหลายวันควรรีบไปพบแพทย์",
        "ภูเก็ตมีชายหาดสวยหลายแห่ง เช่น หาดกะตะและหาดกะรน ช่วงเดือนพฤศจิกายนถึงเมษายนทะเลสงบ เหมาะกับการดำน้ำดูปะการัง",
        "ฟุตบอลไทยลีกนัดล่าสุด ทีมเจ้าบ้านเอาชนะไปสองต่อหนึ่ง ประตูชัยเกิดขึ้นในนาทีที่แปดสิบเก้า จากลูกโหม่งของกองหลังตัวเก่า",
        "ผู้มีเงินได้ต้องยื่นแบบภาษีเงินได้บุคคลธรรมดาภายในสิ้นเดือนมีนาคม หากยื่นทางอินเทอร์เน็ตจะได้รับการขยายเวลาออกไปอีกแปดวัน",
        "ช้างไทยเป็นสัตว์สัญลักษณ์ของประเทศ ปางช้างหลายแห่งในเชียงใหม่เปลี่ยนมาให้นักท่องเที่ยว ดูแลและอาบน้ำช้างแทนการขี่",
        "ปลากัดเป็นปลาที่เลี้ยงง่าย ควรเปลี่ยนน้ำสัปดาห์ละครั้ง ให้อาหารวันละสองมื้อ และไม่ควรเลี้ยงตัวผู้สองตัวไว้ในโหลเดียวกัน",
        "ควรล้างแผ่นกรองเครื่องปรับอากาศทุกเดือน และตั้งอุณหภูมิไว้ที่ยี่สิบหกองศา จะช่วยประหยัดค่าไฟได้มาก",
        "กาแฟดอยช้างปลูกบนความสูงกว่าหนึ่งพันเมตรในจังหวัดเชียงราย เกษตรกรเก็บผลกาแฟสุกด้วยมือแล้วนำไปตากแห้งก่อนคั่ว",
        "ฟ้าทะลายโจรเป็นสมุนไพรที่นิยมใช้บรรเทาอาการเจ็บคอและหวัด แต่ไม่ควรรับประทานติดต่อกันนานเกินหนึ่งสัปดาห์",
        "นักเรียนที่ต้องการเข้ามหาวิทยาลัยต้องสมัครผ่านระบบทีแคสและสอบวิชาที่คณะกำหนด ควรตรวจสอบเกณฑ์คะแนนของแต่ละรอบให้ดี",
        "ถ้าอินเทอร์เน็ตบ้านช้า ให้ลองปิดเปิดเราเตอร์ใหม่ และวางเราเตอร์ไว้กลางบ้าน ห่างจากไมโครเวฟและผนังหนา",
        "วันลอยกระทงตรงกับคืนวันเพ็ญเดือนสิบสอง ผู้คนนำกระทงที่ทำจากใบตองไปลอยในแม่น้ำ เพื่อขอขมาพระแม่คงคา",
        "การประชุมเลื่อนไปเป็นวันพฤหัสบดีเวลาบ่ายสามโมงที่ห้องประชุมชั้นสอง กรุณาส่งสไลด์ภายในเย็นวันพุธ",
        "พัสดุหมายเลขสี่แปดสองหนึ่งสามขึ้นสถานะว่าส่งถึงแล้วเมื่อวันจันทร์ แต่เรายังไม่ได้รับ บริษัทขนส่งบอกว่าพนักงานฝากไว้กับเพื่อนบ้าน",
    ),
}


def passages() -> list[tuple[str, str]]:
    """Every background passage as (language group, text), in a fixed order."""
    return [(group, text) for group, texts in BACKGROUND.items() for text in texts]


# Names this set of passages: vectors stored for another set are made again.
VERSION = hashlib.sha256("\n".join(text for _, text in passages()).encode()).hexdigest()[:12]
